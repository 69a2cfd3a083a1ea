package channels

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/apollo-11/apollo/notify"
)

// fieldNames lists the setting names of a Config: its yaml tags.
func fieldNames[C any]() []string {
	t := reflect.TypeFor[C]()
	var names []string
	for f := range t.Fields() {
		if name := yamlName(f); name != "" {
			names = append(names, name)
		}
	}
	return names
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

// decodeStrict fills the Config that ptr points to from raw, one setting
// at a time, so that an error names the setting. Build has already
// refused unknown settings.
func decodeStrict(raw map[string]any, ptr any) error {
	v := reflect.ValueOf(ptr).Elem()
	var errs []error
	for i := range v.NumField() {
		name := yamlName(v.Type().Field(i))
		if val, ok := raw[name]; ok && name != "" {
			if err := decodeValue(name, val, v.Field(i).Addr().Interface()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// decodeValue converts a value as the YAML loader made it (string, number,
// bool, list, map) into the Go value ptr points to. A single string is
// taken for a list of one: "to: ops@example.com" means what it says.
func decodeValue(field string, val any, ptr any) error {
	target := reflect.TypeOf(ptr).Elem()
	if s, ok := val.(string); ok && target.Kind() == reflect.Slice && target.Elem().Kind() == reflect.String {
		val = []any{s}
	}
	b, err := json.Marshal(val)
	if err == nil {
		err = json.Unmarshal(b, ptr)
	}
	if err != nil {
		return notify.Invalid(field, fmt.Sprintf("want %s, got %s", describe(target), describeValue(val)), "")
	}
	return nil
}

// decodeDuration takes "90s", "10m", "1h30m", or a number of seconds. A
// number too large for a time.Duration is refused: multiplied, it would
// wrap around to a negative or a tiny duration.
func decodeDuration(field string, val any) (time.Duration, error) {
	switch v := val.(type) {
	case string:
		d, err := time.ParseDuration(v)
		if err == nil && d >= 0 {
			return d, nil
		}
	case int:
		return secondsDuration(field, int64(v))
	case int64:
		return secondsDuration(field, v)
	case float64:
		if v >= 0 && v < math.MaxInt64/float64(time.Second) {
			return time.Duration(v * float64(time.Second)), nil
		}
	}
	return 0, notify.Invalid(field, fmt.Sprintf("want a duration, got %s", describeValue(val)), `write it like "30s", "10m" or "1h"`)
}

// describe names a Go type the way a configuration's reader thinks of it.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(describe(t.Elem()), "a ") + "s"
	case reflect.Map:
		return "a map of names to " + strings.TrimPrefix(describe(t.Elem()), "a ") + "s"
	}
	return t.String()
}

// describeValue names what the configuration holds, without its content:
// the value may be a secret.
func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "true or false"
	case int, int64, uint64:
		return "a whole number"
	case float64:
		if v == math.Trunc(v) {
			return "a whole number"
		}
		return "a number with a fraction"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("a %T", v)
}

// secondsDuration is a whole number of seconds as a duration, refused
// when negative or too large for a time.Duration (about 292 years).
func secondsDuration(field string, secs int64) (time.Duration, error) {
	if secs < 0 || secs > math.MaxInt64/int64(time.Second) {
		return 0, notify.Invalid(field, fmt.Sprintf("%d seconds is out of range", secs), `write it like "30s", "10m" or "1h"`)
	}
	return time.Duration(secs) * time.Second, nil
}
