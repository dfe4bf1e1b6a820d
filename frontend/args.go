package frontend

import (
	"bytes"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	segjson "github.com/segmentio/encoding/json"
)

// Arguments decoded once. The full check (tool.decodeFull) decodes a
// call's arguments into a generic value, walks the tool's schema over it,
// and decodes them again into the tool's input type: about a sixth of the
// front-end's CPU on an fs_stat. For a tool whose schema uses only what
// can be checked on the typed value (types, enums of strings, minimum and
// maximum, item counts, required pointers and slices), typedArgs decodes
// straight into the input type with a strict decoder (unknown and
// differently-cased names refused) and checks the rest on the result.
//
// It only ever accepts: whatever it is unsure of (a null, a number with a
// fraction or an exponent, a decoding error, a bound not met) goes to the
// full check, which accepts or refuses with its own message. So the
// arguments it accepts are exactly those the full check would accept,
// decoded to the same value, and every refusal is the full check's.

// typedArgs checks a tool's decoded input against its schema.
type typedArgs struct {
	fields []typedField
	// paths are the fields the tool declares as naming paths (tool.paths),
	// with their _base64 twins.
	paths []typedField
}

// typedField is one property of the input type and what its schema asks.
type typedField struct {
	name     string
	index    []int
	required bool
	enum     []string
	min, max *float64
	// minItems and maxItems bound a slice.
	minItems, maxItems *int
}

// newTypedArgs returns the checks of schema s on values of type t (a
// struct), or nil when s asks for something they do not cover.
func newTypedArgs(t reflect.Type, s *jsonschema.Schema) *typedArgs {
	if t.Kind() != reflect.Struct || s.Type != "object" || s.AdditionalProperties == nil ||
		s.AdditionalProperties.Not == nil || !onlyKeywords(s, "Type", "Properties", "Required", "AdditionalProperties") {
		return nil
	}
	byName := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "" || name == "-" || len(f.Index) != 1 {
			return nil
		}
		byName[name] = f
	}
	if len(byName) != len(s.Properties) {
		return nil
	}
	ta := &typedArgs{}
	for _, name := range slices.Sorted(mapKeys(s.Properties)) {
		f, ok := byName[name]
		if !ok {
			return nil
		}
		tf, ok := newTypedField(name, f, s.Properties[name], slices.Contains(s.Required, name))
		if !ok {
			return nil
		}
		ta.fields = append(ta.fields, tf)
	}
	return ta
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// newTypedField reads what the property schema p asks of field f.
func newTypedField(name string, f reflect.StructField, p *jsonschema.Schema, required bool) (typedField, bool) {
	tf := typedField{name: name, index: f.Index, required: required, min: p.Minimum, max: p.Maximum,
		minItems: p.MinItems, maxItems: p.MaxItems}
	if !onlyKeywords(p, "Type", "Types", "Enum", "Minimum", "Maximum", "MinItems", "MaxItems", "Items") {
		return tf, false
	}
	typ := p.Type
	if typ == "" {
		// A required pointer keeps the null its type implies; the
		// decoder is never asked to take a null (typedArgs.decode).
		if len(p.Types) != 2 || p.Types[0] != "null" || !required {
			return tf, false
		}
		typ = p.Types[1]
	}
	ft := f.Type
	pointer := ft.Kind() == reflect.Pointer
	if pointer {
		ft = ft.Elem()
	}
	// Absence is visible only in a pointer or a slice: a required field
	// of another kind could be missing unseen.
	if required && !pointer && ft.Kind() != reflect.Slice {
		return tf, false
	}
	if !kindMatches(ft, typ) {
		return tf, false
	}
	for _, e := range p.Enum {
		s, ok := e.(string)
		if !ok || ft.Kind() != reflect.String {
			return tf, false
		}
		tf.enum = append(tf.enum, s)
	}
	if (p.Minimum != nil || p.Maximum != nil) && ft.Kind() != reflect.Int64 && ft.Kind() != reflect.Int {
		return tf, false
	}
	if typ == "array" {
		if pointer || p.Items == nil || !onlyKeywords(p.Items, "Type") || !kindMatches(ft.Elem(), p.Items.Type) {
			return tf, false
		}
	} else if p.Items != nil || p.MinItems != nil || p.MaxItems != nil {
		return tf, false
	}
	return tf, true
}

// kindMatches reports whether the decoder fills t only from JSON values of
// schema type typ, and from every such value the schema allows but for
// those typedArgs.decode sends to the full check.
func kindMatches(t reflect.Type, typ string) bool {
	switch typ {
	case "string":
		return t.Kind() == reflect.String
	case "boolean":
		return t.Kind() == reflect.Bool
	case "integer":
		return t.Kind() == reflect.Int64 || t.Kind() == reflect.Int
	case "array":
		return t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8
	}
	return false
}

// onlyKeywords reports whether s sets no keyword but the named fields and
// annotations, which do not change what validates.
func onlyKeywords(s *jsonschema.Schema, allowed ...string) bool {
	c := *s
	c.Title, c.Description, c.Default, c.Deprecated, c.ReadOnly, c.WriteOnly, c.Examples, c.PropertyOrder =
		"", "", nil, false, false, false, nil, nil
	v := reflect.ValueOf(&c).Elem()
	for _, name := range allowed {
		f := v.FieldByName(name)
		f.Set(reflect.Zero(f.Type()))
	}
	return v.IsZero()
}

// decode decodes raw into in (a pointer to the tool's input type) and
// reports whether the result is certain to be what the full check would
// accept and decode. When it reports false, in is to be discarded.
func (ta *typedArgs) decode(raw []byte, in any) bool {
	if !plainJSON(raw) {
		return false
	}
	rest, err := segjson.Parse(raw, in, segjson.DontMatchCaseInsensitiveStructFields|segjson.DisallowUnknownFields)
	if err != nil || len(bytes.TrimSpace(rest)) != 0 {
		return false
	}
	v := reflect.ValueOf(in).Elem()
	for i := range ta.fields {
		if !ta.fields[i].holds(v.Field(ta.fields[i].index[0])) {
			return false
		}
	}
	return true
}

// holds reports whether the decoded field v satisfies the schema.
func (tf *typedField) holds(v reflect.Value) bool {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return !tf.required // no null reached the decoder: absent
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		return tf.enum == nil || slices.Contains(tf.enum, v.String())
	case reflect.Int64, reflect.Int:
		n := float64(v.Int())
		return (tf.min == nil || n >= *tf.min) && (tf.max == nil || n <= *tf.max)
	case reflect.Slice:
		if v.IsNil() && tf.required {
			return false
		}
		return (tf.minItems == nil || v.Len() >= *tf.minItems) && (tf.maxItems == nil || v.Len() <= *tf.maxItems)
	}
	return true
}

// auditArgs returns the path arguments of the decoded input as a generic
// decoding would give them (strings, []any, map[string]any), for
// tool.callPaths.
func (ta *typedArgs) auditArgs(in any) map[string]any {
	v := reflect.ValueOf(in).Elem()
	var m map[string]any
	for _, tf := range ta.paths {
		f := v.Field(tf.index[0])
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				continue
			}
			f = f.Elem()
		}
		var g any
		switch f.Kind() {
		case reflect.String:
			g = f.String()
		case reflect.Slice:
			if f.IsNil() {
				continue
			}
			items := make([]any, f.Len())
			for i := range items {
				items[i] = f.Index(i).Interface()
			}
			g = items
		case reflect.Map:
			if f.IsNil() {
				continue
			}
			keys := make(map[string]any, f.Len())
			for _, k := range f.MapKeys() {
				keys[k.String()] = nil
			}
			g = keys
		default:
			continue
		}
		if m == nil {
			m = make(map[string]any, len(ta.paths))
		}
		m[tf.name] = g
	}
	return m
}

// plainJSON reports whether raw holds no null and no number with a
// fraction or an exponent outside its strings: the values whose decoding
// into a Go type differs from what the schema says of them.
func plainJSON(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == 'n':
			return false
		case c == '.' || c == 'e' || c == 'E':
			// Outside strings, e only ends true and false: a letter
			// after another letter.
			if c == 'e' && i > 0 && (raw[i-1] == 'u' || raw[i-1] == 's') {
				continue
			}
			return false
		}
	}
	return true
}
