package main

import "github.com/apollo-11/apollo/alert"

// keepForRollback writes, at a clean stop, the rules and expectations
// that tenants set through the API into the one file each the release
// before this one reads (alert.FileRules.WriteLegacy), so that going back
// to it (docs/deploy.md, TestUpgradeAllInOneAndBack) finds them. It runs
// after the API stopped: no save comes between. A failure is logged: it
// costs a rollback those texts, not this release anything.
func (s *server) keepForRollback() {
	var stores []*alert.FileRules
	if l, ok := s.alerts.(*localAlerting); ok && l.rules != nil {
		stores = append(stores, l.rules)
	}
	if s.expect != nil {
		if f, ok := s.expect.saved.(*alert.FileRules); ok {
			stores = append(stores, f)
		}
	}
	for _, f := range stores {
		if err := f.WriteLegacy(); err != nil {
			s.log.Warn("the texts saved through the API were not written for a rollback to the release before", "err", err)
		}
	}
}
