package bundletest

import (
	"reflect"
	"time"

	"github.com/lvms-dev/lvms/migrate/record"
	"github.com/lvms-dev/lvms/operator/names"
)

// Shift moves every time in the state by d: the manifest's, the objects' (creation, deletion, conditions,
// events, the start of a migration record in names.MigrationStateAnnotation), the agents' clocks and when
// they were fetched. Zero times stay zero (they mean "not set"). A state
// shifted decades away must give the same findings and views, with only the times in them moved: that is how
// tests prove the analyzers read "now" from the bundle, never from the wall clock.
func Shift(s *State, d time.Duration) {
	shiftValue(reflect.ValueOf(&s.Manifest).Elem(), d)
	for _, o := range s.Objects {
		shiftValue(reflect.ValueOf(o), d)
		shiftRecord(o.GetAnnotations(), d)
	}
	for _, v := range s.Views {
		shiftValue(reflect.ValueOf(v), d)
	}
	for n, at := range s.Fetched {
		if !at.IsZero() {
			s.Fetched[n] = at.Add(d)
		}
	}
}

var timeType = reflect.TypeFor[time.Time]()

// shiftValue adds d to every settable, non-zero time.Time reachable from v through pointers, interfaces,
// structs and slices. Maps are left alone (no API type keeps times in one; unstructured content has none here).
func shiftValue(v reflect.Value, d time.Duration) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			shiftValue(v.Elem(), d)
		}
	case reflect.Struct:
		if v.Type() == timeType {
			if t := v.Interface().(time.Time); v.CanSet() && !t.IsZero() {
				v.Set(reflect.ValueOf(t.Add(d)))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				shiftValue(v.Field(i), d)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			shiftValue(v.Index(i), d)
		}
	}
}

// shiftRecord moves the start of a readable migration record; an unreadable one stays as it is.
func shiftRecord(annotations map[string]string, d time.Duration) {
	r, err := record.Decode("", annotations)
	if r == nil || err != nil || r.Started.IsZero() {
		return
	}
	r.Started = r.Started.Add(d)
	if value, err := r.Encode(); err == nil {
		annotations[names.MigrationStateAnnotation] = value
	}
}
