package wire

// LoginRequest is the body of POST /v1/login/begin, /v1/login/fail and
// /v1/login/succeed: one login attempt, by a named login of the
// configuration.
type LoginRequest struct {
	// Login names the login rule.
	Login string `json:"login"`
	// User is what the client typed as its username, any bytes.
	User string `json:"user"`
	// Address is the client's IP address.
	Address string `json:"address"`
	// CaptchaSolved reports, for begin, that the client solved a CAPTCHA
	// the application demanded.
	CaptchaSolved bool `json:"captcha_solved,omitempty"`
	// Ticket is, for fail and succeed, the ticket begin answered.
	Ticket string `json:"ticket,omitempty"`
}

// LoginResponse is the answer to POST /v1/login/begin.
type LoginResponse struct {
	// Allowed reports whether the application may check the password.
	// When false, answer as for a wrong password, or with 429 and
	// retry_after, the same whether the account exists or not.
	Allowed bool `json:"allowed"`
	// Ticket is, when allowed, what fail or succeed must send back: the
	// attempt's reserved failure, settled once.
	Ticket string `json:"ticket,omitempty"`
	// Delay is how many seconds to wait before answering the client: the
	// progressive delay for its recent failures.
	Delay float64 `json:"delay"`
	// RetryAfter is, when not allowed, how many seconds until the attempt
	// would be allowed without a CAPTCHA; 0 for a refusal that does not
	// lapse (the deny list).
	RetryAfter float64 `json:"retry_after"`
	// Captcha reports that the application should demand a CAPTCHA.
	Captcha bool `json:"captcha,omitempty"`
	// KnownGood reports that the address logged in to this account
	// before.
	KnownGood bool `json:"known_good,omitempty"`
	// Reason says which rule decided, for logs: never show it to the
	// person logging in.
	Reason string `json:"reason,omitempty"`
	// Guard is "allow-list", "deny-list" or "banned" when the guard
	// decided, as for every other call.
	Guard string `json:"guard,omitempty"`
}

// SettleResponse is the answer to POST /v1/login/fail and succeed.
type SettleResponse struct {
	// Duplicate reports that the ticket was settled before: nothing was
	// done again.
	Duplicate bool `json:"duplicate,omitempty"`
	// Banned reports, for a failure, that it made the login's jail ban
	// the address; BanSeconds is how long for.
	Banned     bool    `json:"banned,omitempty"`
	BanSeconds float64 `json:"ban_seconds,omitempty"`
}
