package main

import (
	"strings"
	"testing"
)

func TestNodeagentRunner(t *testing.T) {
	tests := []struct {
		name       string
		opts       nodeagentOptions
		wantPrefix string
		wantEnv    string
		wantErr    string
	}{
		{name: "direct on the host", opts: nodeagentOptions{hostNsenter: "false", devicesFile: "node-a.devices"}},
		{name: "through nsenter", opts: nodeagentOptions{hostNsenter: "true", lvmSystemDir: "/etc/lvm-a"},
			wantPrefix: "nsenter --target 1 --mount --uts --ipc --net --pid --", wantEnv: "LVM_SYSTEM_DIR=/etc/lvm-a"},
		{name: "a process on the host decides by itself", opts: nodeagentOptions{hostNsenter: "auto"}},
		{name: "unknown value", opts: nodeagentOptions{hostNsenter: "sometimes"}, wantErr: `--host-nsenter="sometimes": want true, false or auto`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := nodeagentRunner(tc.opts)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(r.Prefix, " "); got != tc.wantPrefix {
				t.Errorf("prefix = %q, want %q", got, tc.wantPrefix)
			}
			if got := strings.Join(r.Env, " "); got != tc.wantEnv {
				t.Errorf("env = %q, want %q", got, tc.wantEnv)
			}
			if r.DevicesFile != tc.opts.devicesFile {
				t.Errorf("devices file = %q", r.DevicesFile)
			}
		})
	}
}

func TestNodeagentCommand_RefusesBadFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"nodeagent", "--node-name="}, "the node name is empty: pass --node-name or set NODE_NAME"},
		{[]string{"nodeagent", "--node-name=n1", "--configuration-policy=Magic"}, `--configuration-policy="Magic": the only policy is ExternalConfiguration`},
	}
	for _, tc := range tests {
		cmd := newRootCommand()
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || err.Error() != tc.wantErr {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
