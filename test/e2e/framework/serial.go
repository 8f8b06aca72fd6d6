package framework

import "testing"

// serialEnv is set, through t.Setenv, by every test that disturbs what all
// tests share. Its value is only a name for whoever reads the environment.
const serialEnv = "QUORUMCTL_E2E_SERIAL_TEST"

// Serial marks a test that disturbs what every test of the suite shares:
// it stops the operator or restarts it with other settings, stops a node,
// or drains one. Such a test must never overlap another one, and it does not
// have to wait for anything: Go runs each top-level test that does not call
// t.Parallel to its end, one after another, and releases the tests that do
// only once all of those have finished. So the suite runs its serial tests
// first, one at a time, and then all its parallel tests together.
//
// Serial turns that into a rule the testing package enforces, rather than
// a convention a later edit can break: t.Setenv panics in a test that is
// parallel or has a parallel parent, and t.Parallel panics in a test that
// called t.Setenv. The helpers that disturb the shared cluster (StopNode,
// ScaleOperator, SetOperatorEnv) call it themselves; a test that disturbs it
// in another way (kubectl drain) calls it first. Subtests of a serial test
// may still run in parallel with each other, never with another test.
func Serial(t testing.TB) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("%s disturbs every test of the suite (the operator or a node) and so must not run in parallel: %v", t.Name(), r)
		}
	}()
	t.Setenv(serialEnv, t.Name())
}
