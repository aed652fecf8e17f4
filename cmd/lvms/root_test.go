package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lvms-dev/lvms/docsection"
	"github.com/lvms-dev/lvms/e2e/testenv"

	ctrl "sigs.k8s.io/controller-runtime"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestHelp_ListsEverySubcommand(t *testing.T) {
	out, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"operator", "nodeagent", "lvmd", "console", "tui", "bundle", "analyze", "migrate", "local", "version"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("lvms --help does not list %q:\n%s", name, out)
		}
	}
}

func TestVersion_PrintsVersionCommitAndGo(t *testing.T) {
	out, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lvms " + version, "commit: " + commit, "go: " + runtime.Version()} {
		if !strings.Contains(out, want) {
			t.Errorf("lvms version output lacks %q:\n%s", want, out)
		}
	}
}

func TestNotYet_SaysSo(t *testing.T) {
	root := newRootCommand()
	root.AddCommand(notYet("frobnicate", "x"))
	root.SetArgs([]string{"frobnicate", "--any", "flag"})
	root.SetOut(io.Discard)
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "lvms frobnicate is not yet available") || exitCode(err) != 1 {
		t.Fatalf("got %v", err)
	}
}

// envRunAndLog makes the test binary, re-executed by TestCommands_SetTheControllerLoggerFirst, run one lvms
// command and then log an error through controller-runtime's logger, in a fresh process.
const envRunAndLog = "LVMS_TEST_RUN_AND_LOG"

func init() {
	if args := os.Getenv(envRunAndLog); args != "" {
		root := newRootCommand()
		root.SetArgs(strings.Fields(args))
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		ctrl.Log.Error(errors.New("probe error"), "Probe")
		os.Exit(0)
	}
}

// Every command sets controller-runtime's logger before it runs: one that does not gets a goroutine stack
// on stderr 30 s into its run, and the errors of its clients are lost. A command that runs no controllers
// shows those errors on its stderr (and nothing below error); each in a process of its own.
func TestCommands_SetTheControllerLoggerFirst(t *testing.T) {
	// Each fails at once (nothing to read): the logger is set before a command runs, whatever it does then.
	for _, args := range []string{"version", "analyze /nonexistent.tar.gz", "console --bundle /nonexistent.tar.gz", "move status x -n y --kubeconfig /nonexistent", "tui --kubeconfig /nonexistent"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRunAndLog+"="+args)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("lvms %s: %v\n%s", args, err, out)
		}
		if !strings.Contains(string(out), `level=ERROR msg=Probe err="probe error"`) {
			t.Errorf("after lvms %s controller-runtime's errors are not shown (its logger is not set):\n%s", args, out)
		}
	}
}

// A console on a busy address says so once, naming the address and the flag around it.
func TestConsole_BusyAddressNamedOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, "console", "--listen", addr, "--kubeconfig", kc)
	if err == nil || strings.Count(err.Error(), addr) != 1 || !strings.Contains(err.Error(), "address already in use") ||
		!strings.Contains(err.Error(), "pass --listen with another") {
		t.Fatalf("lvms console on a busy %s: %v, want the address named once and --listen offered", addr, err)
	}
}

// Every command shows examples in its --help, and every flag an example uses is one of that command's:
// an example never goes stale when a flag is renamed.
func TestHelp_EveryCommandHasExamplesThatParse(t *testing.T) {
	root := newRootCommand()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub)
		}
		if c == root {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Example section", c.CommandPath())
			return
		}
		for line := range strings.Lines(c.Example) {
			fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "sudo "))
			if len(fields) == 0 || fields[0] != "lvms" {
				continue // another tool's command (kubectl, oc)
			}
			cmd, rest, err := root.Find(fields[1:])
			if err != nil || cmd != c && !slices.Contains(c.Commands(), cmd) {
				t.Errorf("%s: example %q runs %v (%v)", c.CommandPath(), line, cmd.CommandPath(), err)
				continue
			}
			for _, f := range rest {
				if f == ">" {
					break
				}
				if !strings.HasPrefix(f, "-") {
					continue
				}
				name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
				if strings.HasPrefix(f, "--") && cmd.Flags().Lookup(name) == nil || !strings.HasPrefix(f, "--") && cmd.Flags().ShorthandLookup(name) == nil {
					t.Errorf("%s: example %q uses %s, which %s does not have", c.CommandPath(), strings.TrimSpace(line), f, cmd.CommandPath())
				}
			}
		}
	}
	walk(root)
}

// A missing or extra argument is named by the usage line's name for it, and the usage line is shown.
func TestArgs_MissingAndExtraAreNamed(t *testing.T) {
	for args, want := range map[string]string{
		"analyze":            "lvms analyze: missing BUNDLE (usage: lvms analyze BUNDLE [flags])",
		"bundle diff a":      "lvms bundle diff: missing B (usage: lvms bundle diff A B [flags])",
		"bundle extract":     "lvms bundle extract: missing FILE and DIR (usage: lvms bundle extract FILE DIR [flags])",
		"analyze a b":        `lvms analyze: too many arguments: "b" is more than BUNDLE`,
		"console x":          `lvms console takes no arguments, got "x" (usage: lvms console [flags])`,
		"migrate plan a b c": `lvms migrate plan: too many arguments: "b c" after a (usage: lvms migrate plan [LVMCLUSTER] [flags])`,
	} {
		_, err := run(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("lvms %s: %v, want %q", args, err, want)
		}
	}
}

// No flag's help shows its default twice (its own words and pflag's "(default ...)").
func TestHelp_NoFlagShowsTwoDefaults(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for line := range strings.Lines(c.Flags().FlagUsages()) {
			if strings.Count(line, "default") > 1 && strings.Count(line, "(default") > 1 {
				t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(line))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	t.Setenv("LVMS_IMAGE", "quay.io/lvms/lvms:test") // a default from the environment shows too
	walk(newRootCommand())
}

// The README's exit-code table is the one the commands' --help is made from; UPDATE_README=1 rewrites it.
func TestExitCodes_READMETableIsCurrent(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "README.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := docsection.Splice(doc, exitCodesBegin, exitCodesEnd, exitCodesTable())
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("UPDATE_README") == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(doc, want) {
		t.Errorf("README.md's exit-code table is not cmd/lvms/exitcodes.go's: run UPDATE_README=1 go test -run TestExitCodes_READMETableIsCurrent ./cmd/lvms")
	}
	for _, e := range exitCodes {
		out, err := run(t, append(strings.Fields(e.command), "--help")...)
		if err != nil || !strings.Contains(out, fmt.Sprintf("\n  %d %s", e.code, e.means)) {
			t.Errorf("lvms %s --help does not list exit code %d (%v)", e.command, e.code, err)
		}
	}
}

// -v is the same everywhere it exists: an integer log level (as kubectl's), never a bool.
func TestHelp_VIsALogLevelEverywhere(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().ShorthandLookup("v"); f != nil && f.Value.Type() != "int" {
			t.Errorf("%s: -v is a %s (--%s), want the log level", c.CommandPath(), f.Value.Type(), f.Name)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}

// -o/--output is an output format in every command that has it (issue 41 point 9), described the same
// way, and any other value is refused naming the formats; lvms bundle's file name is --output-file (its
// old -o is deprecated and hidden).
func TestHelp_OIsAnOutputFormatEverywhere(t *testing.T) {
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.LocalFlags().ShorthandLookup("o"); f != nil && f.Deprecated == "" {
			seen++
			if f.Name != "output" || f.Value.Type() != "format" || !strings.HasPrefix(f.Usage, "output format: ") {
				t.Errorf("%s: -o is --%s (%s) %q, want --output, an output format", c.CommandPath(), f.Name, f.Value.Type(), f.Usage)
			}
			if err := f.Value.Set("bogus"); err == nil || !strings.Contains(f.Usage, strings.TrimPrefix(err.Error(), "use ")) {
				t.Errorf("%s: -o bogus: %v, want the formats %q named", c.CommandPath(), err, f.Usage)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	if seen < 4 {
		t.Errorf("only %d commands have -o", seen)
	}
}

// A flag that several commands have is described in the same words in each (issue 41 point 14), except
// the few whose meaning is the command's own, each listed with why.
func TestHelp_NoTwoCommandsDescribeOneFlagDifferently(t *testing.T) {
	ownMeaning := map[string]string{
		"namespace":    "whose namespace it is differs: the operator's, the claim's, the LVMCluster's, where to collect",
		"timeout":      "what is waited for differs: a collection, a migration step, a move",
		"accept-lossy": "plan prints the objects and exits 0, apply and preflight go on",
		"listen":       "the console serves the cluster, bundle serve a bundle's read-only API",
		"output":       "each command prints its own formats (all of them output formats, see TestHelp_OIsAnOutputFormatEverywhere)",
	}
	usages := map[string]map[string][]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if usages[f.Name] == nil {
				usages[f.Name] = map[string][]string{}
			}
			usages[f.Name][f.Usage] = append(usages[f.Name][f.Usage], c.CommandPath())
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	for name, us := range usages {
		if _, own := ownMeaning[name]; own || len(us) < 2 {
			continue
		}
		t.Errorf("--%s is described %d ways: %v", name, len(us), us)
	}
	for name := range ownMeaning {
		if len(usages[name]) < 2 {
			t.Errorf("--%s is listed as meaning something of its own in each command, but is described one way: drop it from the list", name)
		}
	}
}
