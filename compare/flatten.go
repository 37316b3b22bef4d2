package compare

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"ratelab/results"
)

// figures returns every number a record of a results document holds (a
// Run, a Storm, a Scenario, ...), keyed by the path of JSON field names
// that leads to it, such as "goodput_rps", "server_final.dead" or
// "counts.429". It reads the record's own typed fields, so a field added
// to the schema is compared without a list to keep here:
//
//   - numbers (integers and floats) are figures; strings and booleans are
//     not;
//   - structs and pointers to them are followed, their fields' keys after
//     the parent's and a dot;
//   - maps are followed key by key;
//   - slices of records are followed element by element, each named by its
//     first non-empty string field (a limiter's or a strategy's name) or
//     else its index, in brackets: "strategies[polite].ratio";
//   - time series and raw samples are left out: slices of numbers (bins,
//     per-call times) and of Sample and ScenarioSample (the server's
//     readings over time), which the HTML page draws instead.
func figures(record any) []keyValue {
	var out []keyValue
	flatten("", reflect.ValueOf(record), &out)
	return out
}

// keyValue is one figure of a record.
type keyValue struct {
	key   string
	value float64
}

var (
	sampleType         = reflect.TypeFor[results.Sample]()
	scenarioSampleType = reflect.TypeFor[results.ScenarioSample]()
)

func flatten(prefix string, v reflect.Value, out *[]keyValue) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			flatten(prefix, v.Elem(), out)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		*out = append(*out, keyValue{strings.TrimSuffix(prefix, "."), float64(v.Int())})
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		*out = append(*out, keyValue{strings.TrimSuffix(prefix, "."), float64(v.Uint())})
	case reflect.Float32, reflect.Float64:
		*out = append(*out, keyValue{strings.TrimSuffix(prefix, "."), v.Float()})
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			flatten(prefix+name+".", v.Field(i), out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int {
			return strings.Compare(fmt.Sprint(a.Interface()), fmt.Sprint(b.Interface()))
		})
		for _, k := range keys {
			flatten(prefix+fmt.Sprint(k.Interface())+".", v.MapIndex(k), out)
		}
	case reflect.Slice, reflect.Array:
		et := v.Type().Elem()
		for et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() != reflect.Struct || et == sampleType || et == scenarioSampleType {
			return
		}
		base := strings.TrimSuffix(prefix, ".")
		seen := map[string]int{}
		for i := range v.Len() {
			label := elementLabel(v.Index(i), i)
			if seen[label]++; seen[label] > 1 {
				label = fmt.Sprintf("%s#%d", label, seen[label])
			}
			flatten(base+"["+label+"].", v.Index(i), out)
		}
	}
}

// elementLabel names element i of a slice of records: its first non-empty
// string field, or its index.
func elementLabel(v reflect.Value, i int) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return fmt.Sprint(i)
		}
		v = v.Elem()
	}
	for j := range v.NumField() {
		if f := v.Field(j); f.Kind() == reflect.String && f.String() != "" && v.Type().Field(j).IsExported() {
			return f.String()
		}
	}
	return fmt.Sprint(i)
}
