package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// format is -o/--output, the form of what a command prints, as kubectl's -o is: one of the command's
// formats, the first by default; any other value is refused when the flags are parsed, naming the formats.
type format struct {
	value   *string
	formats []string
}

func (f format) String() string { return *f.value }
func (f format) Type() string   { return "format" }

func (f format) Set(v string) error {
	if !slices.Contains(f.formats, v) {
		return fmt.Errorf("use %s", orList(f.formats))
	}
	*f.value = v
	return nil
}

// addOutputFlag adds -o/--output with the formats the command prints (the first is the default).
func addOutputFlag(fs *pflag.FlagSet, p *string, formats ...string) {
	*p = formats[0]
	fs.VarP(format{p, formats}, "output", "o", "output format: "+orList(formats))
}

// orList is "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
