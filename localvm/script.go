// This file renders what a guest runs: the -test.run pattern and flags of the re-executed test binary and
// the shell script that sets its environment and starts it.

package localvm

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// passedEnv are host environment variables a guest command gets too (when set): the control-plane binaries
// (envtest runs in the guest as well: it has a loopback interface) and the cache directory.
func passedEnv() []string { return []string{"KUBEBUILDER_ASSETS", "LVMS_CACHE"} }

// guestEnv is the environment the guest script adds: passedEnv from the host, then extra.
func guestEnv(extra map[string]string) map[string]string {
	env := map[string]string{}
	for _, k := range passedEnv() {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// scriptSpec is what the guest script needs.
type scriptSpec struct {
	role    string
	serials []string
	env     map[string]string
	dir     string // working directory (the host test's, visible read-only through 9p with a writable overlay)
	binary  string // guest path of the test binary
	args    []string
}

// guestScript renders the shell script a VM runs: environment, working directory, test binary.
func guestScript(s scriptSpec) string {
	var b strings.Builder
	b.WriteString("# Written by e2e/vm: runs the host's test binary in the guest.\n")
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	env[EnvRole] = s.role
	env[EnvShared] = GuestWorkDir + "/shared"
	env[EnvDisks] = strings.Join(s.serials, " ")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	if top := hiddenTop(s.dir); top != "" {
		// The guest mounts a fresh tmpfs here; bring the host's tree back at the same path so paths the
		// test derives from its source files (repository root, testdata) resolve as on the host.
		fmt.Fprintf(&b, "[ -d %[3]s ] || { mkdir -p %[1]s && mount -o bind %[2]s %[1]s; } || exit 125\n",
			shellQuote(top), shellQuote(HostRootInGuest+top), shellQuote(s.dir))
	}
	fmt.Fprintf(&b, "cd %s || exit 125\n", shellQuote(s.dir))
	b.WriteString("exec " + shellQuote(s.binary))
	for _, a := range s.args {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

// HostRootInGuest is where the guest sees the host's root (read-only) besides the overlay at /.
const HostRootInGuest = "/run/lvms-host"

// hiddenTop returns the top directory of dir below a mount the guest replaces with a fresh tmpfs (/tmp,
// /run, /dev/shm), for example /tmp/ci-clone for /tmp/ci-clone/e2e/vm, or "" when dir is not hidden.
func hiddenTop(dir string) string {
	for _, m := range []string{"/tmp/", "/run/", "/dev/shm/"} {
		if rest, ok := strings.CutPrefix(dir, m); ok {
			first, _, _ := strings.Cut(rest, "/")
			if first == "" {
				return ""
			}
			return m + first
		}
	}
	return ""
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
