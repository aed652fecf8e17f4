package redact

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const jwt = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bHZtczpnYXRoZXIifQ.c2lnbmF0dXJlLXNpZ25hdHVyZS1zaWduYXR1cmU"

func TestText_RemovesCredentials(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		secret []string // must be gone
		keep   []string // must stay
		rule   string
	}{
		{name: "bearer header in a log", in: `I1122 request GET /api Authorization: Bearer sha256~AbCdEfGhIjKlMnOp done`,
			secret: []string{"sha256~AbCdEfGhIjKlMnOp"}, keep: []string{"Authorization: Bearer ", "done"}, rule: RuleBearer},
		{name: "bearer token with characters after its padding", in: `bearer 00000000=tail9 next`, // found by FuzzText: the tail survived
			secret: []string{"00000000", "=tail9"}, keep: []string{"bearer ", " next"}, rule: RuleBearer},
		{name: "service account JWT", in: "token is " + jwt + " ok", secret: []string{jwt, "c2lnbmF0dXJl"}, keep: []string{"token is", "ok"}, rule: RuleJWT},
		{name: "kubeconfig user", in: "users:\n- name: admin\n  user:\n    token: kubeconfig-token-123\n    client-key-data: LS0tLS1CRUdJTiBSU0EK\n    password: hunter2\n",
			secret: []string{"kubeconfig-token-123", "LS0tLS1CRUdJTiBSU0EK", "hunter2"}, keep: []string{"users:", "name: admin"}, rule: RuleKubeconfig},
		{name: "kubeconfig auth provider", in: "    auth-provider:\n      config:\n        id-token: idtok-abc\n        refresh-token: reftok-def\n        client-secret: cs-ghi\n",
			secret: []string{"idtok-abc", "reftok-def", "cs-ghi"}, keep: []string{"auth-provider:"}, rule: RuleKubeconfig},
		{name: "kubeconfig as JSON", in: `{"users":[{"name":"a","user":{"token":"json-tok-1","password":"p\"w"}}]}`,
			secret: []string{"json-tok-1", `p\"w`}, keep: []string{`"name":"a"`}, rule: RuleJSONCredential},
		{name: "env in YAML", in: "env:\n- name: DB_PASSWORD\n  value: planted-password-1\n- name: LOG_LEVEL\n  value: debug\n",
			secret: []string{"planted-password-1"}, keep: []string{"DB_PASSWORD", "LOG_LEVEL", "debug"}, rule: RuleEnvPair},
		{name: "env in last-applied JSON", in: `{"env":[{"name":"API_TOKEN","value":"tok-777"},{"name":"MODE","value":"x"}]}`,
			secret: []string{"tok-777"}, keep: []string{"API_TOKEN", `"value":"x"`}, rule: RuleEnvPair},
		{name: "assignments in a log", in: "starting with DB_PASSWORD=pw-1 --api-token=tk-2 aws_secret_access_key: sk-3 size=5",
			secret: []string{"pw-1", "tk-2", "sk-3"}, keep: []string{"DB_PASSWORD=", "size=5"}, rule: RuleAssignment},
		{name: "URL credentials", in: "dialing https://admin:s3cr3t@registry.example.com/v2", secret: []string{"s3cr3t"},
			keep: []string{"https://admin:", "@registry.example.com"}, rule: RuleURL},
		{name: "private key", in: "key: |\n  -----BEGIN RSA PRIVATE KEY-----\n  MIIEpAIBAAKCAQEA\n  -----END RSA PRIVATE KEY-----\nnext: 1\n",
			secret: []string{"MIIEpAIBAAKCAQEA"}, keep: []string{"next: 1"}, rule: RulePrivateKey},
		{name: "docker config auth", in: `{"auths":{"registry.example.com":{"auth":"dXNlcjpwbGFudGVkLXB3","identitytoken":"idt-1"}}}`,
			secret: []string{"dXNlcjpwbGFudGVkLXB3", "idt-1"}, keep: []string{`"registry.example.com"`, `"auth":"`}, rule: RuleJSONCredential},
		{name: "Basic authorization header", in: "GET /v2/ HTTP/1.1\r\nAuthorization: Basic dXNlcjpwbGFudGVk\r\nHost: r",
			secret: []string{"dXNlcjpwbGFudGVk"}, keep: []string{"Authorization: Basic ", "Host: r"}, rule: RuleAuthHeader},
		{name: "Basic header in JSON", in: `{"headers":{"Authorization":"Basic dXNlcjpwbGFudGVk"}}`,
			secret: []string{"dXNlcjpwbGFudGVk"}, keep: []string{`"headers"`}, rule: RuleAuthHeader},
		{name: "--token VALUE on a command line", in: "exec: /usr/bin/agent --token planted-tok-1 --verbose --password=pw-2 -v 3",
			secret: []string{"planted-tok-1", "pw-2"}, keep: []string{"--token ", "--verbose", "-v 3"}, rule: RuleFlagValue},
		{name: "--token VALUE in a YAML args list", in: "args:\n- --token\n- planted-tok-2\n- --log-level\n- debug\n",
			secret: []string{"planted-tok-2"}, keep: []string{"- --token", "- --log-level", "- debug"}, rule: RuleFlagValue},
		{name: "--token VALUE in a JSON args list", in: `{"args":["--client-secret","planted-cs-3","--mode","fast"]}`,
			secret: []string{"planted-cs-3"}, keep: []string{`"--client-secret"`, `"fast"`}, rule: RuleFlagValue},
		{name: "*_PASS, *_PWD and *_KEY names", in: "env:\n- name: DB_PASS\n  value: planted-a\n- name: SMTP_PWD\n  value: planted-b\n- name: S3_KEY\n  value: planted-c\n- name: PWD\n  value: /home/app\n",
			secret: []string{"planted-a", "planted-b", "planted-c"}, keep: []string{"DB_PASS", "/home/app"}, rule: RuleEnvPair},
		{name: "AWS key", in: "id AKIAABCDEFGHIJKLMNOP used", secret: []string{"AKIAABCDEFGHIJKLMNOP"}, keep: []string{"used"}, rule: RuleAWSKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			out := string(r.Text("f.log", []byte(tc.in)))
			for _, s := range tc.secret {
				if strings.Contains(out, s) {
					t.Errorf("%q is still in:\n%s", s, out)
				}
			}
			for _, k := range tc.keep {
				if !strings.Contains(out, k) {
					t.Errorf("%q was removed too:\n%s", k, out)
				}
			}
			rep := r.Report()
			found := false
			for _, red := range rep.Redactions {
				if red.Rule == tc.rule && red.File == "f.log" && red.Count > 0 {
					found = true
				}
				if strings.Contains(red.File+red.Rule, Replacement) {
					t.Errorf("report entry %+v", red)
				}
			}
			if !found || rep.Total == 0 {
				t.Errorf("report %+v does not count rule %s", rep, tc.rule)
			}
		})
	}
}

func TestText_LeavesOrdinaryDataAlone(t *testing.T) {
	for name, in := range map[string]string{
		"lvmnode":       "apiVersion: lvm.topolvm.io/v2alpha1\nkind: LVMNode\nmetadata:\n  name: worker-a\nspec:\n  volumeGroups:\n  - name: vg1\n    forceWipeDevicesAndDestroyAllData: true\n",
		"lsblk":         `{"blockdevices":[{"name":"/dev/sda","size":107374182400,"serial":"QM00001","wwn":"0x5000c500a1b2c3d4"}]}`,
		"storage class": "parameters:\n  csi.storage.k8s.io/fstype: xfs\n  topolvm.io/device-class: fast\n  csi.storage.k8s.io/provisioner-secret-name: name-only\n",
		"log":           "I1122 10:00:00 reconciled volume group vg1 on /dev/sdb (token bucket 5/s)",
	} {
		r := New()
		if out := r.Text(name, []byte(in)); !bytes.Equal(out, []byte(in)) {
			t.Errorf("%s changed:\n%s\nwant:\n%s", name, out, in)
		}
	}
}

func TestText_KeepsYAMLValid(t *testing.T) {
	in := "apiVersion: v1\nkind: ConfigMap\ndata:\n  kubeconfig: |\n    users:\n    - name: a\n      user:\n        token: abc-def-ghi\n        password: \"quoted pw\"\n  other: value\n"
	out := New().Text("cm.yaml", []byte(in))
	var v map[string]any
	if err := yaml.Unmarshal(out, &v); err != nil {
		t.Fatalf("redacted YAML does not parse: %v\n%s", err, out)
	}
	if data := v["data"].(map[string]any); data["other"] != "value" || !strings.Contains(data["kubeconfig"].(string), "token: "+Replacement) {
		t.Errorf("data = %v", data)
	}
}

func TestObject_SecretsAndEnv(t *testing.T) {
	secret := map[string]any{"kind": "Secret", "data": map[string]any{"password": "cGxhbnRlZA=="}, "stringData": map[string]any{"k": "v"}}
	list := map[string]any{"kind": "List", "items": []any{secret}}
	pod := map[string]any{"kind": "Pod", "spec": map[string]any{"containers": []any{map[string]any{"env": []any{
		map[string]any{"name": "S3_SECRET_KEY", "value": "planted-env"},
		map[string]any{"name": "NODE_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.nodeName"}}},
		map[string]any{"name": "GOMEMLIMIT", "value": "100MiB"},
		map[string]any{"name": "DB_PASSWORD", "value": ""}, // nothing to hide: left as is, not counted
	}}}}}
	r := New()
	r.Object("list.yaml", list)
	r.Object("pod.yaml", pod)
	if _, ok := secret["data"]; ok {
		t.Error("a Secret kept its data")
	}
	if _, ok := secret["stringData"]; ok {
		t.Error("a Secret kept its stringData")
	}
	env := pod["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"].([]any)
	if env[0].(map[string]any)["value"] != Replacement || env[2].(map[string]any)["value"] != "100MiB" || env[3].(map[string]any)["value"] != "" {
		t.Errorf("env = %v", env)
	}
	rep := r.Report()
	want := []Redaction{{File: "list.yaml", Rule: RuleSecretData, Count: 2}, {File: "pod.yaml", Rule: RuleEnvValue, Count: 1}}
	if len(rep.Redactions) != len(want) || rep.Redactions[0] != want[0] || rep.Redactions[1] != want[1] || rep.Total != 3 {
		t.Errorf("report = %+v, want %+v", rep.Redactions, want)
	}
}

// plantings put a known secret where a rule must find it, whatever text the fuzzer puts around it.
var plantings = []func(secret string) string{
	func(s string) string { return "\nAuthorization: Bearer " + s + "\n" },
	func(s string) string { return "\nAuthorization: Basic " + s + "\n" },
	func(s string) string { return `{"auth":"` + s + `"}` },
	func(s string) string { return "\n- name: DB_PASSWORD\n  value: " + s + "\n" },
	func(s string) string { return " --token " + s + " " },
	func(s string) string { return "\n- --token\n- " + s + "\n" },
	func(s string) string { return " DB_PASS=" + s + " " },
	func(s string) string { return "\n    token: " + s + "\n" },
}

func FuzzText(f *testing.F) {
	f.Add([]byte("Authorization: Bearer abcdefghijk\ntoken: x\n"), []byte("log line"), uint8(0))
	f.Add([]byte(`{"name":"DB_PASSWORD","value":"a\"b"}`), []byte(`{"x":1}`), uint8(2))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nabc"), []byte("\n"), uint8(5))
	f.Fuzz(func(t *testing.T, before, after []byte, which uint8) {
		// Redaction is idempotent on any text.
		data := append(append([]byte{}, before...), after...)
		once := New().Text("f", data)
		twice := New().Text("f", once)
		if !bytes.Equal(once, twice) {
			t.Errorf("redaction is not idempotent:\n%q\n%q", once, twice)
		}
		// A planted secret is gone wherever it sits in the fuzzer's text.
		const secret = "PlantedSecret0123456789"
		planted := string(before) + plantings[int(which)%len(plantings)](secret) + string(after)
		if out := New().Text("f", []byte(planted)); bytes.Contains(out, []byte(secret)) {
			t.Errorf("planted secret survived:\nin:  %q\nout: %q", planted, out)
		}
	})
}

// Keys that name a Secret (its name, namespace or a reference) keep their values, which are object names;
// keys that hold one are still redacted, in the same text.
func TestText_NamesOfSecretsAreKept(t *testing.T) {
	in := "secretName: lvms-node-agent-metrics-cert\nsecretNamespace: openshift-storage\n" +
		`{"secretRef": "creds"}` + "\nclientSecret: hunter2-long-value\nsecret: s3cr3t-value\n"
	r := New()
	out := string(r.Text("f.yaml", []byte(in)))
	for _, kept := range []string{"secretName: lvms-node-agent-metrics-cert", "secretNamespace: openshift-storage", `"secretRef": "creds"`} {
		if !strings.Contains(out, kept) {
			t.Errorf("%q redacted:\n%s", kept, out)
		}
	}
	for _, gone := range []string{"hunter2-long-value", "s3cr3t-value"} {
		if strings.Contains(out, gone) {
			t.Errorf("the secret %q kept:\n%s", gone, out)
		}
	}
	names := New()
	names.Text("g.yaml", []byte("secretName: lvms-node-agent-metrics-cert\nsecretNamespace: openshift-storage\n"))
	if rep := names.Report(); rep.Total != 0 {
		t.Errorf("names of Secrets counted as %d redactions: %+v", rep.Total, rep.Redactions)
	}
}
