package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	opmove "github.com/lvms-dev/lvms/operator/move"
)

// runMove runs lvms through its root command with --wait's clock replaced by clock (when not nil) and
// returns stdout, stderr and the exit code main would use.
func runMove(t *testing.T, clock *moveClock, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRootCommand()
	if clock != nil {
		for _, c := range root.Commands() {
			if c.Name() == "move" {
				root.RemoveCommand(c)
			}
		}
		root.AddCommand(newMoveCommandWith(*clock))
	}
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		errOut.WriteString("error: " + err.Error() + "\n")
		code = exitCode(err)
	}
	return out.String(), errOut.String(), code
}

// scriptedClock is a --wait clock that never sleeps: each poll interval advances its time and plays the
// next step of the operator's part, so a test is the same however fast the machine is.
func scriptedClock(steps ...func()) (*moveClock, *int) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	polls := 0
	return &moveClock{interval: time.Second, now: func() time.Time { return now }, sleep: func(context.Context, time.Duration) error {
		now = now.Add(time.Second)
		if polls < len(steps) {
			steps[polls]()
		}
		polls++
		return nil
	}}, &polls
}

// TestMove_Arguments: what is missing is named with the command that supplies it, before anything connects.
func TestMove_Arguments(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"move", "pvc"}, "name one PersistentVolumeClaim: lvms move pvc NAME -n NAMESPACE"},
		{[]string{"move", "pvc", "db", "--to-node", "b"}, "-n/--namespace is required: the namespace of claim db (lvms move pvc db -n NAMESPACE)"},
		{[]string{"move", "pvc", "db", "-n", "ns"}, "--to-node is required"},
		{[]string{"move", "pvc", "db", "-n", "ns", "--to-node", "b", "--wait", "--timeout", "0s"}, "--timeout 0s: give a positive duration"},
		{[]string{"move", "status", "db"}, "-n/--namespace is required"},
		{[]string{"move", "status", "db", "-n", "ns", "-o", "yaml"}, `invalid argument "yaml" for "-o, --output" flag: use text or json`},
		{[]string{"move", "confirm", "a", "b", "-n", "ns"}, "name one PersistentVolumeClaim: lvms move confirm NAME -n NAMESPACE"},
		{[]string{"move", "abort"}, "name one PersistentVolumeClaim: lvms move abort NAME -n NAMESPACE"},
	}
	for _, tc := range cases {
		_, errOut, code := runMove(t, nil, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("lvms %s: exit %d, %q; want %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

// TestMove_ProgressWords: the copy's progress as --wait prints it.
func TestMove_ProgressWords(t *testing.T) {
	if got := progressWords("3/4"); got != "copied 3 of 4 chunks (75%)" {
		t.Errorf("progress: %q", got)
	}
	if got := progressWords("junk"); got != "progress junk" {
		t.Errorf("unreadable progress: %q", got)
	}
}

// TestMove_AgainstTheAPIServer runs every lvms move command through the root command against a real API
// server, as an admin and as users with and without rights on the claim. There is no operator: the test
// writes the claim's status annotation as the operator does (move.Status as JSON, which is what the
// operator's unexported encodeStatus writes).
func TestMove_AgainstTheAPIServer(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	admin := env.Kubeconfig(t)

	newClaim := func(t *testing.T, ns, name string, st *move.Status) types.NamespacedName {
		t.Helper()
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if st != nil {
			pvc.Annotations = map[string]string{move.AnnotationStatus: encode(t, *st)}
		}
		if err := env.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	claim := func(t *testing.T, key types.NamespacedName) *corev1.PersistentVolumeClaim {
		t.Helper()
		pvc := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(ctx, key, pvc); err != nil {
			t.Fatal(err)
		}
		return pvc
	}
	// setStatus writes the status annotation the way the operator does.
	setStatus := func(t *testing.T, key types.NamespacedName, st move.Status) {
		t.Helper()
		pvc := claim(t, key)
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[move.AnnotationStatus] = encode(t, st)
		if err := env.Client.Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("pvc requests and says what to do", func(t *testing.T) {
		ns := env.Namespace(t)
		key := newClaim(t, ns, "db", nil)
		out, errOut, code := runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", admin)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got := claim(t, key).Annotations[move.AnnotationToNode]; got != "node-b" {
			t.Errorf("to-node annotation %q, want node-b", got)
		}
		for _, want := range []string{"Requested: move the volume of claim " + ns + "/db to node node-b",
			"the claim is Bound to an LVMS volume", "enough free space", "no pod uses the claim",
			"over mutual TLS", "SHA-256", "(its UID changes)", "until you confirm",
			"scale the workload that uses the claim to zero", "at AwaitingConfirmation: start the workload again",
			"lvms move confirm db -n " + ns + " --id ID", "lvms move status db -n " + ns} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}

		_, errOut, code = runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "Not_A_Node", "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, `--to-node "Not_A_Node" is not a node name`) {
			t.Errorf("a bad node name: exit %d, %s", code, errOut)
		}
		_, errOut, code = runMove(t, nil, "move", "pvc", "nope", "-n", ns, "--to-node", "node-b", "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "claim "+ns+"/nope does not exist") {
			t.Errorf("a missing claim: exit %d, %s", code, errOut)
		}
		// A refusal shown before is repeated, naming the pods.
		setStatus(t, key, move.Status{Phase: move.PhaseRefused, TargetNode: "node-b", Message: "claim " + ns + "/db is in use by Pod db-0 (of StatefulSet db): scale what runs them to zero"})
		out, _, code = runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", admin)
		if code != 0 || !strings.Contains(out, "The last check of this request said: claim "+ns+"/db is in use by Pod db-0 (of StatefulSet db)") {
			t.Errorf("a request refused before: exit %d:\n%s", code, out)
		}
	})

	t.Run("status", func(t *testing.T) {
		ns := env.Namespace(t)
		key := newClaim(t, ns, "db", nil)
		out, errOut, code := runMove(t, nil, "move", "status", "db", "-n", ns, "--kubeconfig", admin)
		if code != 0 || out != "Claim "+ns+"/db is not being moved.\n" {
			t.Errorf("no move: exit %d, %q %s", code, out, errOut)
		}
		out, _, _ = runMove(t, nil, "move", "status", "db", "-n", ns, "-o", "json", "--kubeconfig", admin)
		if strings.TrimSpace(out) != "{}" {
			t.Errorf("no move as JSON: %q", out)
		}
		if _, errOut, code := runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", admin); code != 0 {
			t.Fatal(errOut)
		}
		out, _, _ = runMove(t, nil, "move", "status", "db", "-n", ns, "--kubeconfig", admin)
		if !strings.Contains(out, "a move to node node-b is requested; LVMS has not answered yet") {
			t.Errorf("a request without an answer:\n%s", out)
		}

		// The source PV, readable by an admin, names the source node.
		names := driver.New(false)
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + ns},
			Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: "h"}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}}}}}}}}
		if err := env.Client.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
		st := move.Status{ID: "0123456789abcdef", Phase: move.PhaseCopying, TargetNode: "node-b", SourcePV: pv.Name,
			TargetPV: "lvms-move-0123456789abcdef", Progress: "2/4", Message: "the copy failed and is retried from its last verified chunk: reset"}
		setStatus(t, key, st)
		out, errOut, code = runMove(t, nil, "move", "status", "db", "-n", ns, "--kubeconfig", admin)
		want := "Claim " + ns + "/db: Copying (move 0123456789abcdef)\n" +
			"  from:     PersistentVolume " + pv.Name + " on node node-a\n" +
			"  to:       PersistentVolume lvms-move-0123456789abcdef on node node-b\n" +
			"  progress: copied 2 of 4 chunks (50%)\n" +
			"  message:  the copy failed and is retried from its last verified chunk: reset\n" +
			"Keep the workload that uses the claim scaled to zero until AwaitingConfirmation. To undo the move: lvms move abort db -n " + ns + "\n"
		if code != 0 || out != want {
			t.Errorf("status: exit %d %s\n%s\nwant:\n%s", code, errOut, out, want)
		}
		out, _, _ = runMove(t, nil, "move", "status", "db", "-n", ns, "-o", "json", "--kubeconfig", admin)
		var got move.Status
		if err := json.Unmarshal([]byte(out), &got); err != nil || got != st {
			t.Errorf("status as JSON: %+v %v, want %+v", got, err, st)
		}
	})

	t.Run("confirm", func(t *testing.T) {
		ns := env.Namespace(t)
		key := newClaim(t, ns, "db", nil)
		_, errOut, code := runMove(t, nil, "move", "confirm", "db", "-n", ns, "--id", "x", "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "has no move waiting for confirmation") {
			t.Errorf("confirming an unmoved claim: exit %d, %s", code, errOut)
		}
		setStatus(t, key, move.Status{ID: "m1", Phase: move.PhaseAwaitingConfirmation, TargetNode: "node-b", SourcePV: "pv-a", TargetPV: "lvms-move-m1"})
		_, errOut, code = runMove(t, nil, "move", "confirm", "db", "-n", ns, "--id", "m0", "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, `move "m0" is not the claim's move`) || !strings.Contains(errOut, "lvms move confirm db -n "+ns+" --id m1") {
			t.Errorf("a wrong ID: exit %d, %s", code, errOut)
		}
		_, errOut, code = runMove(t, nil, "move", "confirm", "db", "-n", ns, "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "--id is required") || !strings.Contains(errOut, "--id m1") {
			t.Errorf("no ID: exit %d, %s", code, errOut)
		}
		if _, ok := claim(t, key).Annotations[move.AnnotationConfirm]; ok {
			t.Fatal("a refused confirmation annotated the claim")
		}
		out, errOut, code := runMove(t, nil, "move", "confirm", "db", "-n", ns, "--id", "m1", "--kubeconfig", admin)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got := claim(t, key).Annotations[move.AnnotationConfirm]; got != "m1" {
			t.Errorf("confirm annotation %q, want m1", got)
		}
		for _, want := range []string{"Confirmed move m1 of claim " + ns + "/db", "gives the source PersistentVolume pv-a back the reclaim policy it had",
			"with Delete, the source volume is deleted", "keeps using PersistentVolume lvms-move-m1"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("abort", func(t *testing.T) {
		ns := env.Namespace(t)
		key := newClaim(t, ns, "db", nil)
		_, errOut, code := runMove(t, nil, "move", "abort", "db", "-n", ns, "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "claim "+ns+"/db is not being moved: nothing to abort") {
			t.Errorf("abort of an unmoved claim: exit %d, %s", code, errOut)
		}
		setStatus(t, key, move.Status{ID: "m0", Phase: move.PhaseDone, TargetNode: "node-a"})
		_, errOut, code = runMove(t, nil, "move", "abort", "db", "-n", ns, "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "is not being moved (its last move is Done)") {
			t.Errorf("abort after a finished move: exit %d, %s", code, errOut)
		}

		runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", admin)
		out, errOut, code := runMove(t, nil, "move", "abort", "db", "-n", ns, "--kubeconfig", admin)
		if code != 0 || !strings.Contains(out, "Withdrew the request") {
			t.Errorf("abort of a request: exit %d, %s %s", code, out, errOut)
		}
		if _, ok := claim(t, key).Annotations[move.AnnotationToNode]; ok {
			t.Error("the request is still on the claim")
		}

		runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", admin)
		setStatus(t, key, move.Status{ID: "m1", Phase: move.PhaseCopying, TargetNode: "node-b", SourcePV: "pv-a", TargetPV: "lvms-move-m1"})
		out, errOut, code = runMove(t, nil, "move", "abort", "db", "-n", ns, "--kubeconfig", admin)
		if code != 0 || !strings.Contains(out, "Asked LVMS to abort move m1") || !strings.Contains(out, "deletes the volume it created on node node-b (lvms-move-m1)") {
			t.Errorf("abort while copying: exit %d, %s %s", code, out, errOut)
		}
		if got := claim(t, key).Annotations[move.AnnotationAbort]; got != "m1" {
			t.Errorf("abort annotation %q, want m1", got)
		}

		setStatus(t, key, move.Status{ID: "m1", Phase: move.PhaseAwaitingConfirmation, TargetNode: "node-b", SourcePV: "pv-a", TargetPV: "lvms-move-m1"})
		_, errOut, code = runMove(t, nil, "move", "abort", "db", "-n", ns, "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "past the point of abort") {
			t.Errorf("abort after the swap: exit %d, %s", code, errOut)
		}
	})

	t.Run("wait until AwaitingConfirmation, through the swap", func(t *testing.T) {
		ns := env.Namespace(t)
		// An earlier move's status is not the answer to this request.
		key := newClaim(t, ns, "db", &move.Status{ID: "m0", Phase: move.PhaseAborted, TargetNode: "node-c", Message: "aborted: the target volume is deleted"})
		st := move.Status{ID: "m1", Phase: move.PhaseCreatingTarget, TargetNode: "node-b", SourcePV: "pv-a", TargetPV: "lvms-move-m1"}
		at := func(phase move.Phase, progress, sum string) func() {
			return func() {
				st.Phase, st.Progress, st.SHA256 = phase, progress, sum
				setStatus(t, key, st)
			}
		}
		clock, polls := scriptedClock(
			func() {}, // the operator has not answered yet
			at(move.PhaseCreatingTarget, "", ""),
			at(move.PhaseCopying, "1/4", ""),
			at(move.PhaseCopying, "1/4", ""),
			at(move.PhaseCopying, "4/4", ""),
			at(move.PhaseSwapping, "", "abc"),
			func() { // the swap deletes the claim ...
				pvc := claim(t, key)
				pvc.Finalizers = nil
				if err := env.Client.Update(ctx, pvc); err != nil {
					t.Fatal(err)
				}
				if err := env.Client.Delete(ctx, pvc); err != nil {
					t.Fatal(err)
				}
			},
			func() {},
			func() { // ... and creates it again, bound to the new volume
				st.Phase, st.SHA256 = move.PhaseAwaitingConfirmation, "abc"
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db", Annotations: map[string]string{move.AnnotationStatus: encode(t, st)}},
					Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "lvms-move-m1", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
				if err := env.Client.Create(ctx, pvc); err != nil {
					t.Fatal(err)
				}
			},
		)
		out, errOut, code := runMove(t, clock, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--wait", "--kubeconfig", admin)
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		_, followed, _ := strings.Cut(out, "Following the move")
		for _, want := range []string{"\nCreatingTarget ", "\nCopying ", "\nSwapping ", "\nAwaitingConfirmation ",
			"  copied 1 of 4 chunks (25%)\n", "  copied 4 of 4 chunks (100%)\n", "same SHA-256 (abc)",
			"  the claim is deleted for the swap", "lvms move confirm db -n " + ns + " --id m1"} {
			if strings.Count(followed, want) != 1 {
				t.Errorf("the followed move does not show %q once:\n%s", want, followed)
			}
		}
		if strings.Contains(followed, "Aborted") {
			t.Errorf("the earlier move's Aborted was taken for an answer:\n%s", followed)
		}
		if *polls != 9 {
			t.Errorf("%d polls, want 9 (it stops at AwaitingConfirmation)", *polls)
		}
	})

	t.Run("wait stops on a refusal", func(t *testing.T) {
		ns := env.Namespace(t)
		key := newClaim(t, ns, "web-data", nil)
		clock, _ := scriptedClock(func() {
			setStatus(t, key, move.Status{Phase: move.PhaseRefused, TargetNode: "node-b", SourcePV: "pv-a",
				Message: "claim " + ns + "/web-data is in use by Pod web-0 (of StatefulSet web): scale what runs them to zero"})
		})
		out, errOut, code := runMove(t, clock, "move", "pvc", "web-data", "-n", ns, "--to-node", "node-b", "--wait", "--kubeconfig", admin)
		if code == 0 || !strings.Contains(errOut, "was refused: claim "+ns+"/web-data is in use by Pod web-0 (of StatefulSet web)") ||
			!strings.Contains(errOut, "lvms move abort web-data -n "+ns) {
			t.Errorf("a refusal: exit %d, %s", code, errOut)
		}
		if !strings.Contains(out, "\nRefused ") {
			t.Errorf("the refusal is not shown:\n%s", out)
		}

		// Asked again, the refusal shown before is not the answer: the request clears it (the operator does not
		// look again by itself), and --wait waits for the operator's new answer.
		clock, _ = scriptedClock()
		out, errOut, code = runMove(t, clock, "move", "pvc", "web-data", "-n", ns, "--to-node", "node-b", "--wait", "--timeout", "10s", "--kubeconfig", admin)
		if code == 0 || !strings.Contains(errOut, "LVMS did not answer the request") || !strings.Contains(out, "The last check of this request said: claim "+ns+"/web-data is in use") {
			t.Errorf("asked again after a refusal: exit %d, %s\n%s", code, errOut, out)
		}
		if st, ok, _ := opmove.GetStatus(t.Context(), env.Client, key); ok {
			t.Errorf("the request kept the old status %+v: the operator would never look again", st)
		}
	})

	t.Run("wait gives up when nobody answers", func(t *testing.T) {
		ns := env.Namespace(t)
		newClaim(t, ns, "db", nil)
		clock, _ := scriptedClock()
		_, errOut, code := runMove(t, clock, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--wait", "--timeout", "10s", "--kubeconfig", admin)
		if code != 1 || !strings.Contains(errOut, "LVMS did not answer the request to move claim "+ns+"/db within 10s: is the LVMS operator running?") {
			t.Errorf("no operator: exit %d, %s", code, errOut)
		}
	})

	t.Run("a user acts with their own rights", func(t *testing.T) {
		ns := env.Namespace(t)
		key := newClaim(t, ns, "db", nil)
		env.GrantIn(t, ns, "claims", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "patch", "delete"}})
		bob, carol := impersonating(t, admin, "bob"), impersonating(t, admin, "carol")

		_, errOut, code := runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", bob)
		if code != 1 || !strings.Contains(errOut, "you may not read claim "+ns+"/db") || !strings.Contains(errOut, "needs get, patch and delete on the claim") {
			t.Errorf("a user without rights: exit %d, %s", code, errOut)
		}
		if _, ok := claim(t, key).Annotations[move.AnnotationToNode]; ok {
			t.Fatal("a user without rights annotated the claim")
		}
		if _, errOut, code := runMove(t, nil, "move", "pvc", "db", "-n", ns, "--to-node", "node-b", "--kubeconfig", carol); code != 0 {
			t.Fatalf("a user with get, patch and delete on the claim: %s", errOut)
		}
		if got := claim(t, key).Annotations[move.AnnotationToNode]; got != "node-b" {
			t.Errorf("to-node annotation %q", got)
		}
		// Carol may not read PersistentVolumes: the status leaves the source node out and still works.
		setStatus(t, key, move.Status{ID: "m1", Phase: move.PhaseCopying, TargetNode: "node-b", SourcePV: "pv-a", TargetPV: "lvms-move-m1"})
		out, errOut, code := runMove(t, nil, "move", "status", "db", "-n", ns, "--kubeconfig", carol)
		if code != 0 || !strings.Contains(out, "  from:     PersistentVolume pv-a\n") {
			t.Errorf("status as carol: exit %d, %s\n%s", code, errOut, out)
		}
	})
}

func encode(t *testing.T, st move.Status) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// impersonating writes a copy of kubeconfig that acts as user (the admin may impersonate anyone).
func impersonating(t *testing.T, kubeconfig, user string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
