package explain_test

import (
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/console/explain"
)

// The shared path's topics say what is wrong, what it means and what to do, with the node and volume group
// filled in, at the severity the analyzers report.
func TestTopic_SharedPath(t *testing.T) {
	tests := []struct {
		topic    string
		severity explain.Severity
		// why must say what it means for the user.
		why string
	}{
		{explain.TopicLockManagersNotRunning, explain.Error, "can neither create nor join"},
		{explain.TopicLockspaceNotJoined, explain.Error, "no volume of shared1 can be used on this node"},
		{explain.TopicSharedLUNMissing, explain.Error, "cannot join the volume group"},
		{explain.TopicHostIDConflict, explain.Error, "distinct sanlock host IDs"},
		{explain.TopicNoWatchdog, explain.Warning, "it is not reset"},
	}
	for _, tc := range tests {
		t.Run(tc.topic, func(t *testing.T) {
			x := explain.Topic(tc.topic, "The agent says: \"x\".", explain.Context{Node: "san-a", VolumeGroup: "shared1"})
			if !x.Known || x.Code != tc.topic || x.Title == "" || len(x.Next) == 0 || x.Severity != tc.severity {
				t.Fatalf("explanation incomplete or of the wrong severity: %+v", x)
			}
			if !strings.Contains(x.Why, tc.why) || !strings.HasSuffix(x.Why, "The agent says: \"x\".") {
				t.Errorf("Why = %q, want it to contain %q and end with the detail", x.Why, tc.why)
			}
			for _, s := range append([]string{x.Why, x.Warning}, stepTexts(x)...) {
				if strings.ContainsAny(s, "{}") && !strings.Contains(s, "use_lvmlockd") {
					t.Errorf("unfilled placeholder in %q", s)
				}
			}
		})
	}
}
