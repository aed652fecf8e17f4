package redact

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Replacement takes the place of every removed value. It is a plain word so that YAML and JSON stay valid.
const Replacement = "REDACTED"

// Rule names, as they appear in the report.
const (
	RulePrivateKey     = "private-key"
	RuleBearer         = "bearer-token"
	RuleJWT            = "jwt"
	RuleKubeconfig     = "kubeconfig-credential"
	RuleJSONCredential = "json-credential"
	RuleEnvPair        = "env-name-value"
	RuleAssignment     = "secret-assignment"
	RuleURL            = "url-credentials"
	RuleAWSKey         = "aws-access-key"
	RuleSecretData     = "secret-data"
	RuleEnvValue       = "env-value"
	RuleAuthHeader     = "authorization-header"
	RuleFlagValue      = "secret-flag-value"
)

// sensitive matches names that hold secrets (environment variables, keys).
// The short ones only as a suffix part (DB_PASS, SMTP_PWD, S3_KEY): alone they are ordinary words (PWD, KEY).
const sensitive = `(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|APIKEY|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL|_PASS|_PWD|_KEY)`

// SensitiveName reports whether an environment variable or key name suggests a secret value.
func SensitiveName(name string) bool { return sensitiveName.MatchString(name) }

var sensitiveName = regexp.MustCompile(`(?i)` + sensitive)

// textRule replaces the value group of each match; the groups before and after it are kept.
type textRule struct {
	name string
	re   *regexp.Regexp
	// value is the index of the submatch to replace (0: the whole match).
	value int
}

// spared are matches a rule leaves alone, by rule: those whose first group (the key) matches.
var spared = map[string]*regexp.Regexp{RuleAssignment: namesASecret}

// namesASecret matches keys that name a Secret rather than hold one (Kubernetes' secretName,
// secretNamespace, secretRef, tokenSecretRef): their values are object names, kept for the reader.
var namesASecret = regexp.MustCompile(`(?i)secret(?:name|namespace|ref)"?[ \t]*[=:][ \t]*$`)

// Text rules, applied in order. Each keeps the key or prefix and replaces the value.
var textRules = []textRule{
	{RulePrivateKey, regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`), 0},
	// An Authorization header of any scheme (Basic user:password in base64, Digest, a bare token).
	{RuleAuthHeader, regexp.MustCompile(`(?i)(\bauthorization"?[ \t]*[:=][ \t]*"?(?:basic|digest|negotiate|token)[ \t]+)([^\s",;]+)`), 2},
	{RuleBearer, regexp.MustCompile(`(?i)(bearer\s+)([A-Za-z0-9\-._~+/=]{8,})`), 2},
	{RuleJWT, regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), 0},
	// kubeconfig (YAML): token, client keys and certificates, passwords, auth-provider config.
	{RuleKubeconfig, regexp.MustCompile(`(?im)^(\s*-?\s*"?(?:token|id-token|refresh-token|access-token|client-key-data|client-certificate-data|` +
		`client-secret|password|secret|idp-certificate-authority-data)"?\s*:[ \t]*)([^\s#].*)$`), 2},
	// The same keys in JSON (kubeconfigs, last-applied-configuration annotations, logs).
	{RuleJSONCredential, regexp.MustCompile(`(?i)("(?:token|id-token|refresh-token|access-token|client-key-data|client-certificate-data|` +
		`client-secret|password|secret|auth|identitytoken|registrytoken)"\s*:\s*")((?:[^"\\]|\\.)*)(")`), 2},
	// An environment variable with a sensitive name, as YAML (name, then value) or JSON.
	{RuleEnvPair, regexp.MustCompile(`(?i)(name:\s*"?[A-Za-z0-9_.-]*` + sensitive + `[A-Za-z0-9_.-]*"?[ \t]*\n[ \t]*value:[ \t]*)(\S.*)`), 2},
	{RuleEnvPair, regexp.MustCompile(`(?i)("name"\s*:\s*"[A-Za-z0-9_.-]*` + sensitive + `[A-Za-z0-9_.-]*"\s*,\s*"value"\s*:\s*")((?:[^"\\]|\\.)*)(")`), 2},
	// A secret flag whose value is the next argument: "--token VALUE" on a command line, and the same as
	// YAML or JSON args lists. A next argument that is itself a flag is left alone.
	{RuleFlagValue, regexp.MustCompile(`(?i)((?:^|[ \t])--?[A-Za-z0-9_-]*` + sensitive + `[A-Za-z0-9_-]*[ \t]+)([^\s\-"'][^\s]*)`), 2},
	{RuleFlagValue, regexp.MustCompile(`(?im)(^[ \t]*-[ \t]+"?--?[A-Za-z0-9_-]*` + sensitive + `[A-Za-z0-9_-]*"?[ \t]*\n[ \t]*-[ \t]+)([^\s\-].*)$`), 2},
	{RuleFlagValue, regexp.MustCompile(`(?i)("--?[A-Za-z0-9_-]*` + sensitive + `[A-Za-z0-9_-]*"\s*,\s*")([^"\\\-](?:[^"\\]|\\.)*)(")`), 2},
	// KEY=value and key: value in logs and command lines (DB_PASSWORD=x, --token=x, api_key: x).
	{RuleAssignment, regexp.MustCompile(`(?i)((?:^|[\s,;{(\["'-])-{0,2}[A-Za-z0-9_]*` + sensitive + `[A-Za-z0-9_]*"?[ \t]*[=:][ \t]*)((?:"[^"\n]*"|'[^'\n]*'|[^\s,;})\]"'])[^\s,;})\]]*)`), 2},
	{RuleURL, regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/\s@]+:)([^@\s/]+)(@)`), 2},
	{RuleAWSKey, regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), 0},
}

// Redaction is what one rule removed from one file.
type Redaction struct {
	File string `json:"file"`
	Rule string `json:"rule"`
	// Count is how many values were removed.
	Count int `json:"count"`
}

// Report lists every redaction, by file then rule.
type Report struct {
	Replacement string      `json:"replacement"`
	Total       int         `json:"total"`
	Redactions  []Redaction `json:"redactions"`
	// Never lists what is never collected at all.
	Never []string `json:"neverCollected"`
}

// NeverCollected is what a bundle leaves out entirely, whatever the redaction rules say.
var NeverCollected = []string{
	"Secrets (no collector reads them; a Secret's data is also dropped if one is passed in)",
	"ServiceAccount tokens and kubeconfig files",
	"environment variables with secret-looking names (their values)",
}

// Redactor applies the rules and keeps the report. It is safe for concurrent use.
type Redactor struct {
	mu     sync.Mutex
	counts map[[2]string]int
}

// New returns a redactor with an empty report.
func New() *Redactor { return &Redactor{counts: map[[2]string]int{}} }

func (r *Redactor) add(file, rule string, n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	r.counts[[2]string{file, rule}] += n
	r.mu.Unlock()
}

// Text returns data with every credential the text rules find replaced, and counts them for file.
func (r *Redactor) Text(file string, data []byte) []byte {
	for _, rule := range textRules {
		matches := rule.re.FindAllSubmatchIndex(data, -1)
		if len(matches) == 0 {
			continue
		}
		out := make([]byte, 0, len(data))
		last, n := 0, 0
		for _, m := range matches {
			if keep := spared[rule.name]; keep != nil && m[2] >= 0 && keep.Match(data[m[2]:m[3]]) {
				continue
			}
			n++
			start, end := m[2*rule.value], m[2*rule.value+1]
			if start < 0 {
				start, end = m[0], m[1]
			}
			out = append(out, data[last:start]...)
			out = append(out, Replacement...)
			last = end
		}
		data = append(out, data[last:]...)
		r.add(file, rule.name, n)
	}
	return data
}

// Object redacts an API object given as its unstructured content: a Secret (or a List's Secret items)
// loses data and stringData, container environment values with sensitive names are removed. The text rules
// still run over the serialized object afterwards.
func (r *Redactor) Object(file string, obj map[string]any) {
	if items, ok := obj["items"].([]any); ok {
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				r.Object(file, m)
			}
		}
	}
	if obj["kind"] == "Secret" {
		for _, k := range []string{"data", "stringData"} {
			if d, ok := obj[k].(map[string]any); ok {
				r.add(file, RuleSecretData, len(d))
				delete(obj, k)
			}
		}
	}
	r.add(file, RuleEnvValue, redactEnv(obj))
}

// redactEnv walks obj and removes the value of every env entry whose name is sensitive.
func redactEnv(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if k == "env" {
				if list, ok := child.([]any); ok {
					for _, e := range list {
						if m, ok := e.(map[string]any); ok {
							name, _ := m["name"].(string)
							if val, has := m["value"].(string); has && val != "" && SensitiveName(name) {
								m["value"] = Replacement
								n++
							}
						}
					}
				}
			}
			n += redactEnv(child)
		}
	case []any:
		for _, child := range v {
			n += redactEnv(child)
		}
	}
	return n
}

// Report returns the redactions so far, sorted by file and rule.
func (r *Redactor) Report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := Report{Replacement: Replacement, Redactions: make([]Redaction, 0, len(r.counts)), Never: slices.Clone(NeverCollected)}
	for k, n := range r.counts {
		rep.Redactions = append(rep.Redactions, Redaction{File: k[0], Rule: k[1], Count: n})
		rep.Total += n
	}
	slices.SortFunc(rep.Redactions, func(a, b Redaction) int {
		return cmp.Or(strings.Compare(a.File, b.File), strings.Compare(a.Rule, b.Rule))
	})
	return rep
}
