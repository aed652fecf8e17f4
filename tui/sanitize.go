package tui

import (
	"reflect"
	"regexp"
	"strings"
)

// escapeSequence matches terminal escape sequences: CSI (colours, cursor moves, clearing), OSC (window
// titles, clipboard writes with OSC 52, hyperlinks) ended by BEL or ST, and two-character escapes.
var escapeSequence = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?`)

// plain makes cluster-supplied text safe to print on a terminal: escape sequences go, other control
// characters (C0, DEL, C1) become a space. Anyone who can write an event message, an annotation or a label
// could otherwise clear the screen, rewrite what the operator sees or set their clipboard. The views apply
// it to what they draw (rows, details, bars), so only the visible text is checked and the source's
// snapshot is never copied.
func plain(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	s = escapeSequence.ReplaceAllString(s, "")
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// plainStrings walks a value and makes every settable string in it plain (map keys included).
func plainStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			if p := plain(v.String()); p != v.String() {
				v.SetString(p)
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			plainStrings(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				plainStrings(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			plainStrings(v.Index(i))
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String {
			for _, k := range v.MapKeys() {
				e := reflect.New(v.Type().Elem()).Elem()
				e.Set(v.MapIndex(k))
				plainStrings(e)
				v.SetMapIndex(k, e)
			}
			return
		}
		for _, k := range v.MapKeys() {
			key, val := k.String(), v.MapIndex(k).String()
			if pk, pv := plain(key), plain(val); pk != key || pv != val {
				v.SetMapIndex(k, reflect.Value{})
				v.SetMapIndex(reflect.ValueOf(pk).Convert(v.Type().Key()), reflect.ValueOf(pv).Convert(v.Type().Elem()))
			}
		}
	}
}
