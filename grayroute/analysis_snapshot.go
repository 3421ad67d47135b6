package grayroute

// An analysis's state as plain data, so the fleet keeps one analysis in
// Redis that any instance can take up where another left it.

// analysisSnapshot is an Analysis without its config and bounds (those
// come from the rule and the constants).
type analysisSnapshot struct {
	Canary        VersionCounts `json:"canary"`
	Baseline      VersionCounts `json:"baseline"`
	ErrLLR        float64       `json:"err_llr"`
	LatLLR        float64       `json:"lat_llr"`
	StepLatLLR    float64       `json:"step_lat_llr"`
	CanarySlow    float64       `json:"canary_slow"`
	BaseSlow      float64       `json:"base_slow"`
	SlowExpected  float64       `json:"slow_expected"`
	StepWeight    uint32        `json:"step_weight"`
	StepRequests  uint64        `json:"step_requests"`
	StepIntervals int           `json:"step_intervals"`
	StepQuiet     int           `json:"step_quiet"`
	Failing       int           `json:"failing"`
	WeightSeen    bool          `json:"weight_seen"`
}

func (a *Analysis) snapshot() analysisSnapshot {
	return analysisSnapshot{Canary: a.canary, Baseline: a.baseline,
		ErrLLR: a.errTest.llr, LatLLR: a.latTest.llr, StepLatLLR: a.stepLat.llr,
		CanarySlow: a.canarySlow, BaseSlow: a.baseSlow, SlowExpected: a.slowExpected, StepWeight: a.stepWeight,
		StepRequests: a.stepRequests, StepIntervals: a.stepIntervals, StepQuiet: a.stepQuiet, Failing: a.failing, WeightSeen: a.weightSeen}
}

// restoreAnalysis is the analysis a snapshot was taken of, under cfg.
func restoreAnalysis(cfg AnalysisConfig, s *analysisSnapshot) *Analysis {
	a := NewAnalysis(cfg)
	a.canary, a.baseline = s.Canary, s.Baseline
	a.errTest.llr, a.latTest.llr, a.stepLat.llr = s.ErrLLR, s.LatLLR, s.StepLatLLR
	a.canarySlow, a.baseSlow, a.slowExpected, a.stepWeight = s.CanarySlow, s.BaseSlow, s.SlowExpected, s.StepWeight
	a.stepRequests, a.failing, a.weightSeen = s.StepRequests, s.Failing, s.WeightSeen
	a.stepIntervals, a.stepQuiet = s.StepIntervals, s.StepQuiet
	return a
}
