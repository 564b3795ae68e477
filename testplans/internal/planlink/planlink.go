// Package planlink reads a plan's link parameters (plan.ParamProfile and
// the overrides) into a pkg/linkemu link, as `p2pmsg lab amtt` resolves
// its flags. It is apart from package plan because it needs internal/lab,
// which a plan that shapes no link (the swarm plan) should not link.
package planlink

import (
	"fmt"
	"strconv"
	"time"

	"github.com/testground/sdk-go/runtime"

	"github.com/p2pmsg/p2pmsg/internal/lab"
	"github.com/p2pmsg/p2pmsg/pkg/linkemu"
	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
)

// Link reads the link parameters: the profile, then the overrides that
// are not negative. It returns the profile's label and the link as the
// sender sees it (Up is what the sender sends).
func Link(re *runtime.RunEnv) (string, linkemu.Link, error) {
	o := lab.NoOverrides
	var err error
	if o.Up, err = intParam(re, plan.ParamUp); err != nil {
		return "", linkemu.Link{}, err
	}
	if o.Down, err = intParam(re, plan.ParamDown); err != nil {
		return "", linkemu.Link{}, err
	}
	if o.RTT, err = msParam(re, plan.ParamRTT); err != nil {
		return "", linkemu.Link{}, err
	}
	if o.Jitter, err = msParam(re, plan.ParamJitter); err != nil {
		return "", linkemu.Link{}, err
	}
	if o.Loss, err = pctParam(re, plan.ParamLoss); err != nil {
		return "", linkemu.Link{}, err
	}
	profile := re.TestInstanceParams[plan.ParamProfile]
	if profile == "" {
		profile = lab.CustomProfile
	}
	return lab.ResolveLink(profile, o)
}

// numParam reads a number parameter (Testground writes numbers as JSON);
// set is false when it is absent or empty. what names the number in the
// error.
func numParam(re *runtime.RunEnv, name, what string) (v float64, set bool, err error) {
	s, ok := re.TestInstanceParams[name]
	if !ok || s == "" {
		return 0, false, nil
	}
	if v, err = strconv.ParseFloat(s, 64); err != nil {
		return 0, false, fmt.Errorf("parameter %s: %q is not %s", name, s, what)
	}
	return v, true, nil
}

func intParam(re *runtime.RunEnv, name string) (int64, error) {
	v, set, err := numParam(re, name, "a number")
	if err != nil || !set {
		return -1, err
	}
	return int64(v), nil
}

// msParam reads milliseconds; negative and absent keep the profile's (-1).
func msParam(re *runtime.RunEnv, name string) (time.Duration, error) {
	v, set, err := numParam(re, name, "a number of milliseconds")
	if err != nil || !set || v < 0 {
		return -1, err
	}
	return time.Duration(v * float64(time.Millisecond)), nil
}

// pctParam reads a percentage as a fraction; negative and absent keep
// the profile's (-1).
func pctParam(re *runtime.RunEnv, name string) (float64, error) {
	v, set, err := numParam(re, name, "a percentage")
	if err != nil || !set || v < 0 {
		return -1, err
	}
	return v / 100, nil
}
