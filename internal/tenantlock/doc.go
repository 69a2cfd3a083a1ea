// Package tenantlock is a lock for each tenant: writes of one tenant's
// settings (rules, expectations) go one at a time, and never wait for
// another tenant's.
package tenantlock
