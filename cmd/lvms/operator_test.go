package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOperator_NamespaceDefaultsToPodNamespace(t *testing.T) {
	tests := []struct {
		name   string
		env    string
		wanted string
	}{
		{name: "from POD_NAMESPACE", env: "lvms-system", wanted: "lvms-system"},
		{name: "openshift-storage without it", env: "", wanted: "openshift-storage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.env)
			cmd := newOperatorCommand()
			if got := cmd.Flags().Lookup("namespace").Value.String(); got != tc.wanted {
				t.Errorf("--namespace default = %q, want %q", got, tc.wanted)
			}
		})
	}
}

func TestOperator_HelpListsTheEndpointsAndLeaderElection(t *testing.T) {
	out, err := run(t, "operator", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--metrics-bind-address", "--health-probe-bind-address", "--leader-elect", "--namespace", "--node-agent-image"} {
		if !strings.Contains(out, flag) {
			t.Errorf("lvms operator --help lacks %s", flag)
		}
	}
}

func TestOperator_UnreadableKubeconfigIsAClearError(t *testing.T) {
	_, err := run(t, "operator", "--kubeconfig", "/nonexistent/kubeconfig", "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	if err == nil || !strings.Contains(err.Error(), "load kubeconfig /nonexistent/kubeconfig") {
		t.Fatalf("err = %v, want it to name the kubeconfig", err)
	}
}

func TestOperator_LegacySelectsTheDriverNamesOfEverythingItGenerates(t *testing.T) {
	tests := []struct {
		name       string
		env        string
		args       []string
		wantDriver string
	}{
		{name: "default", wantDriver: "topolvm.io"},
		{name: "--legacy", args: []string{"--legacy"}, wantDriver: "topolvm.cybozu.com"},
		{name: "USE_LEGACY", env: "true", wantDriver: "topolvm.cybozu.com"},
		{name: "--legacy=false overrides USE_LEGACY", env: "true", args: []string{"--legacy=false"}, wantDriver: "topolvm.io"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("USE_LEGACY", tc.env)
			var o operatorOptions
			f := pflag.NewFlagSet("operator", pflag.ContinueOnError)
			o.csi.addFlags(f)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			opts := o.operatorOptions()
			if got := opts.Names.Driver(); got != tc.wantDriver {
				t.Errorf("operator driver = %s, want %s", got, tc.wantDriver)
			}
			if got := o.csi.names().Driver(); got != opts.Names.Driver() {
				t.Errorf("CSI controller driver %s differs from the operator's %s", got, opts.Names.Driver())
			}
		})
	}
}
