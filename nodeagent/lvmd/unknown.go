package lvmd

import (
	"fmt"
	"reflect"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// unknownKeys lists, with their lines, the keys of lvmd.yaml that no field of Config reads. TopoLVM's
// lvmd ignores such keys (it decodes leniently), so a file it accepts must not be refused here: they are
// warned about instead. The known keys come from Config's own json tags, so the two never disagree.
func unknownKeys(data []byte) []string {
	var out []string
	walk(data, func(n *yaml.Node, t reflect.Type, path string) {
		if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
			return
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if key := n.Content[i]; fields[key.Value] == nil {
				where := "at the top level"
				if path != "" {
					where = "in " + path
				}
				out = append(out, fmt.Sprintf("line %d: unknown key %q %s (TopoLVM's lvmd ignores it, and so does LVMS)", key.Line, key.Value, where))
			}
		}
	})
	return out
}

// misfit finds the first value of the wrong kind (the reason the decoder gave, without a line) and says
// where it is: "line 4: device-classes[0].spare-gb is "ten", not a whole number".
func misfit(data []byte) string {
	found := ""
	walk(data, func(n *yaml.Node, t reflect.Type, path string) {
		if found != "" {
			return
		}
		want := ""
		switch t.Kind() {
		case reflect.Struct:
			if n.Kind != yaml.MappingNode {
				want = "a map of keys"
			}
		case reflect.Slice:
			if n.Kind != yaml.SequenceNode {
				want = "a list"
			}
		case reflect.Uint, reflect.Uint64:
			if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || strings.HasPrefix(n.Value, "-") {
				want = "a whole number"
			}
		case reflect.Float64:
			if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
				want = "a number"
			}
		case reflect.Bool:
			if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
				want = "true or false"
			}
		case reflect.String:
			if n.Kind != yaml.ScalarNode { // a number or true is read as its text, as TopoLVM does
				want = "a string"
			}
		}
		if want != "" {
			what := "the file"
			if path != "" {
				what = path
			}
			found = fmt.Sprintf("line %d: %s is %s, not %s", n.Line, what, describe(n), want)
		}
	})
	return found
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// walk visits every node of lvmd.yaml that a field of Config reads, with the field's type and its path
// (device-classes[0].thin-pool).
func walk(data []byte, visit func(n *yaml.Node, t reflect.Type, path string)) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return
	}
	walkNode(doc.Content[0], reflect.TypeOf(Config{}), "", visit)
}

func walkNode(n *yaml.Node, t reflect.Type, path string, visit func(*yaml.Node, reflect.Type, string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value: the field keeps its zero value, for TopoLVM too
	}
	visit(n, t, path)
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f := fields[n.Content[i].Value]; f != nil {
				walkNode(n.Content[i+1], f, join(path, n.Content[i].Value), visit)
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, item := range n.Content {
			walkNode(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), visit)
		}
	}
}

// jsonFields maps a struct's json key names to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
