package ratelimit

import (
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even where the host has no zoneinfo (scratch images)

	"github.com/sluicegw/sluice/ratelimit/engine"
	"github.com/sluicegw/sluice/rulestore"
	"github.com/sluicegw/sluice/rulestore/syntax"
)

// parseCalendar reads quota, period and timezone. A quota makes the rule
// a calendar quota (limit_type may be left out, or be calendar); it takes
// the place of qps, which is then an error, as are period and timezone
// without a quota. It reports whether the rule is a calendar quota.
func (r *Rule) parseCalendar(f rulestore.Fields, get func(string) (string, bool)) (bool, error) {
	qv, hasQuota := get("quota")
	_, explicitType := get("limit_type")
	if !hasQuota {
		if r.Type == Calendar {
			return false, f.Errorf("quota", "required with limit_type calendar: requests per period")
		}
		for _, name := range []string{"period", "timezone"} {
			if _, ok := get(name); ok {
				return false, f.Errorf(name, "applies to calendar quotas only (give quota and period)")
			}
		}
		return false, nil
	}
	if explicitType && r.Type != Calendar {
		return false, f.Errorf("quota", "applies to limit_type calendar (a quota implies it: leave limit_type out)")
	}
	r.Type = Calendar
	if _, ok := get("qps"); ok {
		return false, f.Errorf("qps", "does not apply to a calendar quota: quota is the requests per period")
	}
	for _, name := range []string{"lease_size", "control_behavior"} {
		if _, ok := get(name); ok {
			return false, f.Errorf(name, "does not apply to a calendar quota")
		}
	}
	q, ok := syntax.ParseWhole(qv, 1, MaxBurst)
	if !ok {
		return false, f.Errorf("quota", "want a whole number %s: requests per period", syntax.Range(1, int64(MaxBurst)))
	}
	r.Limits.Max = float64(q)
	c := &CalendarQuota{Zone: time.UTC}
	pv, ok := get("period")
	if !ok {
		return false, f.Errorf("period", "required with quota: minute, hour, day, week or month")
	}
	if c.Period, ok = engine.ParsePeriod(pv); !ok {
		return false, f.Errorf("period", "want minute, hour, day, week or month")
	}
	if zv, ok := get("timezone"); ok {
		loc, err := loadZone(zv)
		if err != nil {
			return false, f.Errorf("timezone", "%v", err)
		}
		c.Zone = loc
	}
	r.Calendar = c
	return true, nil
}

// loadZone reads an IANA time zone name. Local is refused: the host's zone
// would make the same rule count differently on different machines.
func loadZone(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "local") {
		return nil, errZone(name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errZone(name)
	}
	return loc, nil
}

type errZone string

func (e errZone) Error() string {
	return "unknown time zone " + strconv.Quote(string(e)) + ": want an IANA name such as Europe/Berlin or America/New_York, or UTC"
}
