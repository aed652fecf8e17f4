package testenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records the failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// TestWaitFor_RefusalEndsTheWaitAtOnceNamingIt: once the workload is refused, the wait ends at the poll that
// sees it, with the refusal and how far the work got, though its timeout is an hour away.
func TestWaitFor_RefusalEndsTheWaitAtOnceNamingIt(t *testing.T) {
	polls, refusalChecks := 0, 0
	done := func() (bool, string) { polls++; return false, fmt.Sprintf("%d of 5000 PVs", polls) }
	refused := func() string {
		if refusalChecks++; refusalChecks < 3 {
			return ""
		}
		return `claim t-1/c-00007: Not enough space: thin pool thin/pool of device class "thin" is past its data usage threshold (90.0% used, threshold 90%)`
	}
	r := &recorder{TB: t}
	WaitFor(r, time.Millisecond, time.Hour, done, func() string { return "" }, refused)
	if polls != 3 {
		t.Errorf("the wait polled %d times; the refusal was there at the 3rd poll", polls)
	}
	for _, want := range []string{"can never complete", "claim t-1/c-00007", "past its data usage threshold (90.0% used, threshold 90%)", "3 of 5000 PVs"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q does not say %q", r.failed, want)
		}
	}
}

// TestWaitFor_DoneWinsAndTimeoutSaysHowFar: work that completes passes however its refusal check stands
// afterwards; work that neither completes nor is refused fails at the timeout with its last state.
func TestWaitFor_DoneWinsAndTimeoutSaysHowFar(t *testing.T) {
	r := &recorder{TB: t}
	polls := 0
	WaitFor(r, time.Millisecond, time.Hour, func() (bool, string) { polls++; return polls == 2, "" }, func() string { return "" })
	if r.failed != "" || polls != 2 {
		t.Errorf("completed work: failed %q after %d polls, want no failure after 2", r.failed, polls)
	}
	r = &recorder{TB: t}
	WaitFor(r, time.Millisecond, 20*time.Millisecond, func() (bool, string) { return false, "4 of 5 PVs" })
	if !strings.Contains(r.failed, "not done after 20ms: 4 of 5 PVs") {
		t.Errorf("timeout: failure %q does not say how far the work got", r.failed)
	}
}

// TestRetried_OnlyWhatTheProvisionerRetries: the provisioner's messages for failures it retries (a node
// agent past the call's timeout, another error) are not refusals; its refusals are.
func TestRetried_OnlyWhatTheProvisionerRetries(t *testing.T) {
	for msg, want := range map[string]bool{
		`The LVMS node agent on node "n1" did not answer within 10s: check that it runs; provisioning is retried with backoff (context deadline exceeded)`:                                             true,
		"Provisioning failed and will be retried: rpc error: code = Unavailable":                                                                                                                       true,
		`Not enough space: 8Mi (8388608 bytes) requested in device class "thin" on node "n1": thin pool thin/pool of device class "thin" is past its data usage threshold (90.0% used, threshold 90%)`: false,
		`Cannot provision the volume: device-class not found: nvme`:                                                                                                                                    false,
		`StorageClass "x" does not exist: create it or change the claim's storageClassName`:                                                                                                            false,
		`The selected node "n9" does not exist any more: the scheduler will choose another node`:                                                                                                       false,
	} {
		if got := Retried(msg); got != want {
			t.Errorf("Retried(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestProcessEnded_NamesHowAndWhatItWrote: a process that ended before its test is named with its exit
// status and output, so a wait on its work ends at once saying so; one still running is not.
func TestProcessEnded_NamesHowAndWhatItWrote(t *testing.T) {
	running := StartProcess(t, "/bin/sleep", nil, "600")
	crashed := StartProcess(t, "/bin/sh", nil, "-c", "echo the operator cannot listen on 127.0.0.1:1 >&2; exit 3")
	r := &recorder{TB: t}
	WaitFor(r, time.Millisecond, time.Hour, func() (bool, string) { return false, "0 of 20 PVs" },
		func() string { return ProcessEnded(running) }, func() string { return ProcessEnded(crashed) })
	for _, want := range []string{"can never complete", "0 of 20 PVs", "sh -c", "ended: exit status 3", "the operator cannot listen on 127.0.0.1:1"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q does not say %q", r.failed, want)
		}
	}
	if got := ProcessEnded(running); got != "" {
		t.Errorf("a running process is said to have ended: %q", got)
	}
}
