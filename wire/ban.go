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
}

// BanRequest is the body of POST /admin/api/bans.
type BanRequest struct {
	Jail     string `json:"jail"`
	Key      string `json:"key"`
	Duration string `json:"duration,omitempty"` // a Go duration: "90m"; empty for the jail's own
	Reason   string `json:"reason,omitempty"`
}
