package plan

import (
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/words"
)

// wrapAt is the width finding messages are wrapped to in the text report.
const wrapAt = 100

// WriteText writes the plan as a report: the verdict, what each set holds, then the findings.
func WriteText(w io.Writer, p *Plan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Migration plan for LVMCluster %s/%s\n", p.Namespace, p.Name)
	b.WriteString(Verdict(p) + "\n")
	for i := range p.NodeSets {
		writeSet(&b, &p.NodeSets[i])
	}
	b.WriteString("\n")
	if !p.ClassesKnown {
		b.WriteString("Existing StorageClasses and VolumeSnapshotClasses were not checked (no cluster and none in the file):\n" +
			"names taken by others and the current default class are unknown.\n\n")
	}
	writeFindings(&b, p)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFindings writes the verdict and the findings alone (for output formats that cannot carry them).
func WriteFindings(w io.Writer, p *Plan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Migration plan for LVMCluster %s/%s\n%s\n", p.Namespace, p.Name, Verdict(p))
	writeFindings(&b, p)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFindings(b *strings.Builder, p *Plan) {
	lossy, notes := p.Counts()
	if len(p.Findings) == 0 {
		b.WriteString("Findings: none\n")
	} else {
		fmt.Fprintf(b, "Findings: %d lossy, %s\n", lossy, words.Count(notes, "note", "notes"))
	}
	for _, f := range p.Findings {
		fmt.Fprintf(b, "  [%s] %s at %s\n", f.Severity, f.Code, f.Path)
		for _, line := range wrap(f.Message, wrapAt-6) {
			b.WriteString("      " + line + "\n")
		}
	}
}

// Verdict is the plan's one-line summary.
func Verdict(p *Plan) string {
	lossy, _ := p.Counts()
	if lossy > 0 {
		return fmt.Sprintf("Result: LOSSY: %d %s where v2alpha1 behaves differently (below); apply only after reading them (--accept-lossy)",
			lossy, words.Noun(lossy, "mapping", "mappings"))
	}
	return "Result: EXACT: every setting of the LVMCluster means the same in v2alpha1"
}

func writeSet(b *strings.Builder, s *lvmv2.LVMNodeSet) {
	fmt.Fprintf(b, "\nLVMNodeSet %s/%s\n", s.Namespace, s.Name)
	fmt.Fprintf(b, "  nodes:       %s\n", describeNodes(s.Spec.NodeSelector))
	fmt.Fprintf(b, "  tolerations: %s\n", describeTolerations(s.Spec.Tolerations))
	for _, dc := range s.Spec.Template.DeviceClasses {
		def := ""
		if dc.Default {
			def = " (default)"
		}
		fmt.Fprintf(b, "  device class %s%s <- v1 device class %s\n", dc.Name, def, dc.Name)
		for _, vg := range s.Spec.Template.VolumeGroups {
			if vg.Name == dc.VolumeGroup {
				access := ""
				if vg.AccessPolicy == lvmv2.AccessPolicyShared {
					access = " (Shared)"
				}
				fmt.Fprintf(b, "    volume group %s%s: %s\n", vg.Name, access, describeDevices(vg.DeviceSelector))
			}
		}
		fmt.Fprintf(b, "    %s\n", describeStrategy(dc))
		fmt.Fprintf(b, "    %s\n", describeClasses(dc))
	}
}

func describeNodes(sel *corev1.NodeSelector) string {
	if sel == nil {
		return "every node whose taints the tolerations allow"
	}
	var terms []string
	for _, t := range sel.NodeSelectorTerms {
		var reqs []string
		for _, r := range t.MatchExpressions {
			reqs = append(reqs, describeRequirement("", r))
		}
		for _, r := range t.MatchFields {
			reqs = append(reqs, describeRequirement("field ", r))
		}
		if len(reqs) > 0 {
			terms = append(terms, strings.Join(reqs, ", "))
		}
	}
	if len(terms) == 0 {
		return "no node (the selector has no requirement)"
	}
	return strings.Join(terms, " or ")
}

func describeRequirement(prefix string, r corev1.NodeSelectorRequirement) string {
	s := prefix + r.Key + " " + string(r.Operator)
	if len(r.Values) > 0 {
		s += " (" + strings.Join(r.Values, ", ") + ")"
	}
	return s
}

func describeTolerations(ts []corev1.Toleration) string {
	if len(ts) == 0 {
		return "none"
	}
	var out []string
	for _, t := range ts {
		s := t.Key
		switch {
		case t.Key == "" && t.Operator == corev1.TolerationOpExists:
			s = "every taint"
		case t.Operator != corev1.TolerationOpExists:
			s += "=" + t.Value
		}
		if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func describeDevices(ds lvmv2.DeviceSelector) string {
	var terms []string
	for _, t := range ds.DeviceSelectorTerms {
		var reqs []string
		for _, e := range t.MatchExpressions {
			if e.Operator == lvmv2.OpAny {
				reqs = append(reqs, "every available device")
				continue
			}
			reqs = append(reqs, fmt.Sprintf("%s %s (%s)", e.Key, e.Operator, strings.Join(e.Values, ", ")))
		}
		terms = append(terms, strings.Join(reqs, ", "))
	}
	return strings.Join(terms, " or ")
}

func describeStrategy(dc lvmv2.DeviceClass) string {
	fs := "raw block volumes only"
	if dc.FilesystemType != "" {
		fs = "fstype " + string(dc.FilesystemType)
	}
	if dc.Thin == nil {
		return "Thick, " + fs
	}
	t := dc.Thin
	chunk, meta := "lvm2 chooses", "lvm2 chooses"
	if t.ChunkSize != nil {
		chunk = t.ChunkSize.String()
	}
	if t.MetadataSize != nil {
		meta = t.MetadataSize.String()
	}
	return fmt.Sprintf("Thin, pool %s: %d%% of the volume group, overprovision %dx, chunk size %s, metadata size %s, grows by %d%% at %d%% full; %s",
		t.PoolName, t.SizePercent, t.OverprovisionRatio, chunk, meta, t.AutoextendPercent, t.AutoextendThreshold, fs)
}

func describeClasses(dc lvmv2.DeviceClass) string {
	s := "StorageClass " + dc.StorageClass.Name
	var opts []string
	if p := dc.StorageClass.ReclaimPolicy; p != nil {
		opts = append(opts, "reclaimPolicy "+string(*p))
	}
	if m := dc.StorageClass.VolumeBindingMode; m != nil {
		opts = append(opts, "volumeBindingMode "+*m)
	}
	for _, k := range sortedKeys(dc.StorageClass.AdditionalParameters) {
		opts = append(opts, k+"="+dc.StorageClass.AdditionalParameters[k])
	}
	if len(opts) > 0 {
		s += " (" + strings.Join(opts, ", ") + ")"
	}
	if dc.SnapshotClass != nil {
		s += ", VolumeSnapshotClass " + dc.SnapshotClass.Name
	}
	return s
}

// wrap breaks s into lines of at most width characters at spaces (a longer word gets a line of its own).
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// LossyMappings says how many mappings of a plan behave differently in v2alpha1, as the CLI, the wizard and
// the TUI say it: "1 mapping behaves differently", "2 mappings behave differently".
func LossyMappings(n int) string {
	return fmt.Sprintf("%d %s differently", n, words.Noun(n, "mapping behaves", "mappings behave"))
}
