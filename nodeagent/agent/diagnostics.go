package agent

import (
	"context"

	"github.com/lvms-dev/lvms/nodeagent/desired"
)

// Desired reads the desired state the agent manages now (as a pass reads it, without changing anything),
// for the diagnostics endpoint's device verdicts (nodeagent/diagnostics.Options.Desired).
func (a *Agent) Desired(ctx context.Context) (*desired.Node, error) {
	in, err := a.fetch(ctx)
	if err != nil {
		return nil, err
	}
	return engineNode(in.desired), nil
}
