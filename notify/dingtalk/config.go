package dingtalk

import (
	"errors"
	"strings"

	"github.com/apollo-11/apollo/notify"
)

// Config is a DingTalk custom robot.
type Config struct {
	// URL is the robot's webhook, with its access_token.
	URL notify.SecretURL `yaml:"url" json:"url"`
	// Secret is the signing secret ("SEC..."), when the robot's security
	// setting is "sign" (加签).
	Secret notify.Secret `yaml:"secret,omitempty" json:"secret,omitempty"`
	// AtMobiles are the phone numbers of members to mention.
	AtMobiles []string `yaml:"at_mobiles,omitempty" json:"at_mobiles,omitempty"`
	// AtAll mentions everyone in the group.
	AtAll bool `yaml:"at_all,omitempty" json:"at_all,omitempty"`
}

// Validate reports every problem, each naming its field.
func (c Config) Validate() error {
	errs := []error{notify.CheckURL("url", c.URL)}
	if c.Secret != "" && !strings.HasPrefix(string(c.Secret), "SEC") {
		errs = append(errs, notify.Invalid("secret", "a DingTalk signing secret starts with SEC",
			"copy the secret shown under the robot's security settings (加签)"))
	}
	for _, m := range c.AtMobiles {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, notify.Invalid("at_mobiles", "empty phone number", "remove it or fill it in"))
			break
		}
	}
	return errors.Join(errs...)
}
