package channels

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/notify/console"
	"github.com/apollo-11/apollo/notify/dingtalk"
	"github.com/apollo-11/apollo/notify/email"
	"github.com/apollo-11/apollo/notify/feishu"
	"github.com/apollo-11/apollo/notify/slack"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/notify/wecom"
)

// BuildOptions are what the notifiers take from outside the configuration;
// Build sets Name.
type BuildOptions struct {
	notify.NotifierOptions
}

// channelType is how to build one type of channel.
type channelType struct {
	fields []string // its own setting names
	build  func(raw map[string]any, opts notify.NotifierOptions) (notify.Notifier, error)
	rate   int // default messages per minute; 0 unlimited
}

var types = map[string]channelType{
	notify.TypeDingTalk: typeOf(dingtalk.New, notify.DefaultRobotRate),
	notify.TypeWeCom:    typeOf(wecom.New, notify.DefaultRobotRate),
	notify.TypeFeishu:   typeOf(feishu.New, 0),
	notify.TypeSlack:    typeOf(slack.New, 0),
	notify.TypeEmail:    typeOf(email.New, 0),
	notify.TypeWebhook:  typeOf(webhook.New, 0),
	notify.TypeConsole:  typeOf(console.New, 0),
}

// typeOf ties a channel package's New to the decoding of its Config.
func typeOf[C any, N notify.Notifier](newNotifier func(C, notify.NotifierOptions) (N, error), rate int) channelType {
	return channelType{fields: fieldNames[C](), rate: rate,
		build: func(raw map[string]any, opts notify.NotifierOptions) (notify.Notifier, error) {
			var cfg C
			if err := decodeStrict(raw, &cfg); err != nil {
				return nil, err
			}
			return newNotifier(cfg, opts)
		}}
}

// Settings every channel has, next to its type's own.
var common = []string{"type", "tenants", "lang", "templates", "rate_per_minute", "timeout", "give_up_after", "queue_size", "queue_total"}

// Types lists the channel types Build knows.
func Types() []string { return slices.Sorted(maps.Keys(types)) }

// Build makes the channel called name, of type typ, from its settings as
// the configuration file has them (after ${ENV} expansion). Every problem
// is reported, each with the field "channels.NAME.FIELD".
func Build(name, typ string, raw map[string]any, opts BuildOptions) (notify.Channel, error) {
	field := "channels." + name
	ct, ok := types[typ]
	if !ok {
		return notify.Channel{}, &apollo.Error{Code: apollo.EINVALID, Field: field + ".type",
			Message: fmt.Sprintf("unknown channel type %q", typ), Hint: "use one of " + strings.Join(Types(), ", ")}
	}
	own, shared := map[string]any{}, map[string]any{}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch {
		case slices.Contains(common, k):
			shared[k] = raw[k]
		case slices.Contains(ct.fields, k):
			own[k] = raw[k]
		default:
			errs = append(errs, &apollo.Error{Code: apollo.EINVALID, Field: field + "." + k,
				Message: fmt.Sprintf("unknown field %q for a %s channel", k, typ),
				Hint:    "known fields: " + strings.Join(append(slices.Clone(ct.fields), common...), ", ")})
		}
	}
	ch := notify.Channel{Name: name, Type: typ, RatePerMinute: ct.rate}
	if err := decodeCommon(shared, typ, &ch); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		o := opts.NotifierOptions
		o.Name = name
		n, err := ct.build(own, o)
		if err != nil {
			errs = append(errs, err)
		}
		ch.Notifier = n
	}
	if err := errors.Join(errs...); err != nil {
		return notify.Channel{}, underField(field, err)
	}
	return ch, nil
}

// decodeCommon reads the settings every channel has.
func decodeCommon(raw map[string]any, typ string, ch *notify.Channel) error {
	var errs []error
	for k, v := range raw {
		var err error
		switch k {
		case "type":
			if s, _ := v.(string); s != typ {
				err = notify.Invalid(k, fmt.Sprintf("type %v here, %s given to Build", v, typ), "keep one type per channel")
			}
		case "tenants":
			err = decodeValue(k, v, &ch.Tenants)
			if err == nil && ch.Tenants == nil {
				ch.Tenants = []string{} // "tenants:" with nothing is a list of none, not the default
			}
		case "lang":
			err = decodeValue(k, v, &ch.Lang)
		case "templates":
			err = decodeValue(k, v, &ch.Templates)
		case "rate_per_minute":
			err = decodeValue(k, v, &ch.RatePerMinute)
		case "queue_size":
			err = decodeValue(k, v, &ch.QueueSize)
		case "queue_total":
			err = decodeValue(k, v, &ch.QueueTotal)
		case "timeout":
			ch.Timeout, err = decodeDuration(k, v)
		case "give_up_after":
			ch.GiveUpAfter, err = decodeDuration(k, v)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// underField prefixes the field of every *apollo.Error in err with p, so
// that "url" from a channel package reads "channels.NAME.url".
func underField(p string, err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, underField(p, e))
		}
		return errors.Join(errs...)
	}
	var ae *apollo.Error
	if !errors.As(err, &ae) {
		return fmt.Errorf("%s: %w", p, err)
	}
	c := *ae
	if c.Field == "" {
		c.Field = p
	} else if !strings.HasPrefix(c.Field, p+".") {
		c.Field = p + "." + c.Field
	}
	return &c
}
