package grayroute

import (
	"strconv"
)

// Event names.
const (
	EventAnalysis   = "gray_analysis"
	EventRolledBack = "gray_rolled_back"
	EventPromoted   = "gray_promoted"
)

func verdictEvent(c *canary, rep *IntervalReport, source string) map[string]any {
	return map[string]any{
		"rule": c.rule, "target": c.target, "fallback": c.fallback, "interval": rep.Interval,
		"outcome": rep.Outcome, "action": rep.Action, "weight": rep.Weight, "new_weight": rep.NewWeight,
		"written": rep.Written, "source": source, "reason": rep.Reason,
		"canary_requests": rep.CanaryRequests, "canary_errors": rep.CanaryErrors,
		"baseline_requests": rep.BaselineRequests, "baseline_errors": rep.BaselineErrors,
		"canary_latency_seconds": rep.CanaryLatency, "baseline_latency_seconds": rep.BaselineLatency,
		"error_evidence": rep.ErrorEvidence, "latency_evidence": rep.LatencyEvidence, "fail_bound": rep.FailBound,
		"latency_limit_seconds": rep.LatencyLimit, "step_latency_evidence": rep.StepLatencyEvidence, "pass_bound": rep.PassBound,
		"step_intervals": rep.StepIntervals, "no_evidence": rep.NoEvidence,
		"instances": rep.Instances, "missing_reports": rep.MissingReports,
	}
}

func percent(bp uint32) float64 { return float64(bp) / 100 }

// formatWeight writes basis points as the weight field's percentage.
func formatWeight(bp uint32) string { return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) }
