package redisbans

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
)

// claimTTL is how long Redis keeps the mark of a claimed lapse: far
// longer than any replica takes to sweep the ban after its end.
const claimTTL = 24 * time.Hour

var _ guard.ExpiryClaimer = (*Registry)(nil)

// ClaimExpiry reports whether this process is the first of the fleet to
// claim the end of b: it sets "{Prefix}:expired:" and the ban's field
// and end with SET NX, kept a day, so that one replica of the fleet
// tells of each lapse. The error wraps sluice.ErrStore.
func (r *Registry) ClaimExpiry(ctx context.Context, b guard.Ban) (bool, error) {
	key := strings.TrimSuffix(r.keys[keyBans], ":bans") + ":expired:" +
		banfield.Name(b.Jail, guard.BanKey(b.Key)) + ":" + strconv.FormatInt(b.Until.UnixMilli(), 10)
	err := r.c.Do(ctx, r.c.B().Set().Key(key).Value("1").Nx().Px(claimTTL).Build()).Error()
	switch {
	case err == nil:
		return true, nil
	case rueidis.IsRedisNil(err):
		return false, nil
	}
	return false, fmt.Errorf("%w: redisbans: claim expiry: %w", sluice.ErrStore, err)
}
