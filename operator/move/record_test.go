package move

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRecordOf_MalformedAnnotationIsAnErrorNamingThePV(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"{", `{"id":"x"}`, `[]`, `{"id":"a","namespace":"n","claim":"c"}`,
		`{"namespace":"n","claim":"c","targetVolume":"t"}`, `{"id":"a","claim":"c","targetVolume":"t"}`, `{"id":"a","namespace":"n","targetVolume":"t"}`} {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Annotations: map[string]string{AnnotationRecord: raw}}}
		if _, err := recordOf(pv); err == nil || !strings.Contains(err.Error(), "PersistentVolume pv-1") {
			t.Errorf("record %q: %v", raw, err)
		}
	}
	pv := &corev1.PersistentVolume{}
	if r, err := recordOf(pv); r != nil || err != nil {
		t.Errorf("no annotation: %v %v", r, err)
	}
}

// The same request gives the same ID; a request made again (a new claim version), another node, PV or claim
// gives another.
func TestMoveID_OnePerRequest(t *testing.T) {
	t.Parallel()
	a, b := moveID("uid-1", "7", "pv", "node-b"), moveID("uid-1", "7", "pv", "node-b")
	others := []string{moveID("uid-1", "8", "pv", "node-b"), moveID("uid-1", "7", "pv", "node-c"), moveID("uid-2", "7", "pv", "node-b"), moveID("uid-1", "7", "pv2", "node-b")}
	if a != b || len(a) != 16 || slices.Contains(others, a) {
		t.Fatalf("ids %s %s, others %v", a, b, others)
	}
}

func TestUsesClaim_PlainAndEphemeral(t *testing.T) {
	t.Parallel()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "db"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
	}}}
	for claim, want := range map[string]bool{"db": true, "web-0-scratch": true, "web-0-data": false, "other": false} {
		if got := usesClaim(pod, claim); got != want {
			t.Errorf("usesClaim(%q) = %v, want %v", claim, got, want)
		}
	}
}

func TestUsersMessage_FinishedPodsDoNotCount(t *testing.T) {
	t.Parallel()
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "job-1"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a"}},
	}
	got := usersMessage("ns/c", pods)
	if !strings.Contains(got, "in use by Pod a, Pod b:") || strings.Contains(got, "job-1") {
		t.Fatalf("message %q", got)
	}
	if usersMessage("ns/c", pods[:1]) != "" {
		t.Fatal("a finished pod blocks the move")
	}
}
