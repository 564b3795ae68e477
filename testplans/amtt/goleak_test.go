package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/p2pmsg/p2pmsg/testplans/internal/plan"
)

// TestMain fails the package's tests if any leaves a goroutine running
// (but the plan's debug listener, which its init starts).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(plan.PlanGoroutine)) }
