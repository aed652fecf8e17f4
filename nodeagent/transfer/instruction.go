package transfer

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationReceiver on the target LogicalVolume is the receiving agent's address ("<move ID>:<host:port>").
const AnnotationReceiver = "move.lvm.topolvm.io/receiver"

var moveIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// SendInstruction is what the operator asks of the source node's agent.
type SendInstruction struct {
	TargetNode, TargetVolume, MoveID string
}

// ReceiveInstruction is what the operator asks of the target node's agent.
type ReceiveInstruction struct {
	SourceNode, SourceVolume, MoveID string
}

// ParseSendTo reads a source LogicalVolume's move.lvm.topolvm.io/send-to: "<node>/<logicalvolume>/<move ID>".
func ParseSendTo(v string) (SendInstruction, error) {
	parts := strings.Split(v, "/")
	if len(parts) != 3 {
		return SendInstruction{}, fmt.Errorf("send-to %q is not <node>/<logicalvolume>/<move ID>", v)
	}
	in := SendInstruction{TargetNode: parts[0], TargetVolume: parts[1], MoveID: parts[2]}
	return in, check(in.TargetNode, in.TargetVolume, in.MoveID)
}

// ParseReceiveFrom reads a target LogicalVolume's move.lvm.topolvm.io/receive-from ("<node>/<logicalvolume>")
// and move.lvm.topolvm.io/id.
func ParseReceiveFrom(v, id string) (ReceiveInstruction, error) {
	node, vol, ok := strings.Cut(v, "/")
	if !ok || strings.Contains(vol, "/") {
		return ReceiveInstruction{}, fmt.Errorf("receive-from %q is not <node>/<logicalvolume>", v)
	}
	in := ReceiveInstruction{SourceNode: node, SourceVolume: vol, MoveID: id}
	return in, check(in.SourceNode, in.SourceVolume, in.MoveID)
}

func check(node, volume, id string) error {
	if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
		return fmt.Errorf("node %q: %s", node, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(volume); len(errs) > 0 {
		return fmt.Errorf("logical volume %q: %s", volume, strings.Join(errs, "; "))
	}
	if !moveIDPattern.MatchString(id) {
		return fmt.Errorf("move ID %q is not 16 hexadecimal digits", id)
	}
	return nil
}

// report is "<move ID>:<value>", the shape of every annotation an agent writes for a move.
func report(id, value string) string { return id + ":" + value }

// reportFor reads "<move ID>:<value>" for move id; ok is false when it is for another move.
func reportFor(v, id string) (string, bool) {
	return strings.CutPrefix(v, id+":")
}
