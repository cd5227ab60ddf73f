package wire

import "time"

// A Ban is a ban as the admin API lists it (GET /admin/api/bans) and
// answers a new one.
type Ban struct {
	Jail     string    `json:"jail"`
	Key      string    `json:"key"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	Offences int       `json:"offences"`
	// Collateral is, for a network ban the registry merged at capacity,
	// how much it covers beyond its offenders, in CollateralUnit
	// ("addresses" for IPv4, "/64s" for IPv6); 0 for a ban of just what
	// was banned.
	Collateral     int64  `json:"collateral"`
	CollateralUnit string `json:"collateral_unit,omitempty"`
	// Refused is how many requests the ban refused, as the process that
	// answered counted them while it held the ban.
	Refused int64 `json:"refused"`
}

// BanRequest is the body of POST /admin/api/bans.
type BanRequest struct {
	Jail     string `json:"jail"`
	Key      string `json:"key"`
	Duration string `json:"duration,omitempty"` // a Go duration: "90m"; empty for the jail's own
	Reason   string `json:"reason,omitempty"`
}
