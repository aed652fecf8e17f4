package image

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Package is one pinned Debian package.
type Package struct {
	Name, Version, Arch, SHA256 string
}

// String is the package as apt names one version of it.
func (p Package) String() string { return p.Name + "=" + p.Version }

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseLock reads packages.lock: one "name version arch sha256" line per package, "#" comments.
func ParseLock(r io.Reader) ([]Package, error) {
	var out []Package
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 || !sha256Hex.MatchString(f[3]) {
			return nil, fmt.Errorf("packages.lock line %d: %q: want \"name version arch sha256\" (run `make image-lock` to regenerate the file)", n, sc.Text())
		}
		out = append(out, Package{Name: f[0], Version: f[1], Arch: f[2], SHA256: f[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read packages.lock: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("packages.lock lists no packages")
	}
	return out, nil
}

// FormatLock writes packages sorted by name, with a header saying where they come from.
func FormatLock(w io.Writer, header string, pkgs []Package) error {
	pkgs = slices.Clone(pkgs)
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
	for _, l := range strings.Split(strings.TrimSpace(header), "\n") {
		if _, err := fmt.Fprintln(w, "# "+l); err != nil {
			return err
		}
	}
	for _, p := range pkgs {
		if _, err := fmt.Fprintf(w, "%s %s %s %s\n", p.Name, p.Version, p.Arch, p.SHA256); err != nil {
			return err
		}
	}
	return nil
}

// Depends parses `apt-cache depends` output for one package: the packages it depends on (Depends and
// PreDepends), taking the first alternative of "|Depends" and the first provider of a virtual <package>.
func Depends(out string) []string {
	var deps []string
	lines := strings.Split(out, "\n")
	skipAlternatives := false
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		alt := strings.HasPrefix(t, "|")
		t = strings.TrimPrefix(t, "|")
		kind, name, ok := strings.Cut(t, ": ")
		if !ok || (kind != "Depends" && kind != "PreDepends") {
			continue
		}
		if skipAlternatives {
			skipAlternatives = alt
			continue
		}
		skipAlternatives = alt
		if strings.HasPrefix(name, "<") {
			// A virtual package: its providers follow, indented further, without a "kind:".
			if i+1 < len(lines) && !strings.Contains(lines[i+1], ":") && strings.TrimSpace(lines[i+1]) != "" {
				name = strings.TrimSpace(lines[i+1])
			} else {
				continue
			}
		}
		name, _, _ = strings.Cut(name, ":") // libfoo:any
		deps = append(deps, name)
	}
	return deps
}
