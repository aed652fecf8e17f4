package analyze

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints findings for a person: problems first, each with its object, message and fix; passes
// are summarized in one line unless all is true.
func WriteText(w io.Writer, fs []Finding, all bool) error {
	s := Summarize(fs)
	var b strings.Builder
	for _, f := range fs {
		if f.Severity == Pass && !all {
			continue
		}
		fmt.Fprintf(&b, "%s  %s: %s\n", strings.ToUpper(string(f.Severity)), f.CheckName, f.Title)
		var where []string
		if f.Node != "" {
			where = append(where, "node "+f.Node)
		}
		if f.VolumeGroup != "" {
			where = append(where, "volume group "+f.VolumeGroup)
		}
		if f.Device != "" {
			where = append(where, "device "+f.Device)
		}
		if f.InvolvedObject != nil {
			where = append(where, f.InvolvedObject.String())
		}
		if len(where) > 0 {
			fmt.Fprintf(&b, "      on:   %s\n", strings.Join(where, ", "))
		}
		if len(f.Codes) > 0 {
			fmt.Fprintf(&b, "      code: %s\n", strings.Join(f.Codes, ", "))
		}
		fmt.Fprintf(&b, "      %s\n", f.Message)
		if f.Fix != "" {
			fmt.Fprintf(&b, "      fix:  %s\n", f.Fix)
		}
		if f.Command != "" {
			fmt.Fprintf(&b, "      run:  %s\n", f.Command)
		}
		if f.Warning != "" {
			fmt.Fprintf(&b, "      WARNING: %s\n", f.Warning)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%d fail, %d warn, %d pass\n", s.Fail, s.Warn, s.Pass)
	_, err := io.WriteString(w, b.String())
	return err
}
