package reaper

import (
	"slices"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	got := parseMountinfo(`22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw
97 30 7:5 / /tmp/T\040a/mnt rw,relatime shared:40 master:1 - ext4 /dev/loop5 rw
98 30 0:52 / /tmp/b rw - btrfs /dev/loop6p1 rw,space_cache=v2
short line
`)
	want := []mount{
		{num: "0:21", point: "/proc", source: "proc"},
		{num: "7:5", point: "/tmp/T a/mnt", source: "/dev/loop5"},
		{num: "0:52", point: "/tmp/b", source: "/dev/loop6p1"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseMountinfo = %+v, want %+v", got, want)
	}
	if got := unescape(`a\134b\011c\12`); got != "a\\b\tc\\12" {
		t.Errorf("unescape = %q", got)
	}
}

func TestParseStat(t *testing.T) {
	p, err := parseStat(42, "42 (a) (b) c) S 1 40 40 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 123 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := (proc{pid: 42, pgid: 40, comm: "a) (b) c", state: 'S'}); p != want {
		t.Errorf("parseStat = %+v, want %+v", p, want)
	}
	if _, err := parseStat(1, "1 (x"); err == nil {
		t.Error("parseStat accepted a line without the end of the name")
	}
}

// The mark is matched whole: another binary's value that merely starts with this one's is not it.
func TestHasVar(t *testing.T) {
	env := []byte("A=1\x00LVMS_TEST_REAPER_OWNER=12-abcd\x00B=2")
	if !hasVar(env, []byte("LVMS_TEST_REAPER_OWNER=12-abcd")) || !hasVar(env, []byte("B=2")) {
		t.Error("entry not found")
	}
	if hasVar(env, []byte("LVMS_TEST_REAPER_OWNER=12-abc")) || hasVar(env, []byte("LVMS_TEST_REAPER_OWNER=2-abcd")) {
		t.Error("a prefix or suffix of an entry matched")
	}
}

func TestRegistry(t *testing.T) {
	var r registry
	for _, m := range []message{
		{opRemove, "/a"}, {opDetach, "/f"}, {opRemove, "/b"}, {opRemove, "/a"}, {opDetach, "/b"},
		{opForget, "/b"}, {"unknown", "/c"},
	} {
		r.apply(m)
	}
	if !slices.Equal(r.remove, []string{"/a"}) || !slices.Equal(r.detach, []string{"/f"}) {
		t.Errorf("registry = %+v", r)
	}
}
