package memcachedbans

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/banfield"
	"github.com/sluicehq/sluice/internal/meta"
)

// claimTTL is how long memcached keeps the mark of a claimed lapse: far
// longer than any replica takes to sweep the ban after its end.
const claimTTL = 24 * time.Hour

var _ guard.ExpiryClaimer = (*Registry)(nil)

// ClaimExpiry reports whether this process is the first of the fleet to
// claim the end of b: it adds "Prefix:expired:" and a digest of the
// ban's jail, key and end on the server of the ban's page, kept a day
// (memcached's add stores only a missing item), so that one replica of
// the fleet tells of each lapse. An eviction of the mark within the day
// may let a late replica tell again. The error wraps sluice.ErrStore.
func (r *Registry) ClaimExpiry(ctx context.Context, b guard.Ban) (bool, error) {
	f := banfield.Name(b.Jail, guard.BanKey(b.Key))
	sum := sha256.Sum256([]byte(f + ":" + strconv.FormatInt(b.Until.UnixNano(), 10)))
	key := strings.TrimSuffix(r.keys[0], ":page:0") + ":expired:" + hex.EncodeToString(sum[:12])
	var batch meta.Batch
	batch.Add(key, []byte{'1'}, claimTTL)
	if err := r.client(pageOf(f, len(r.keys))).Do(ctx, &batch); err != nil {
		return false, fmt.Errorf("%w: memcachedbans: claim expiry: %w", sluice.ErrStore, err)
	}
	rep := batch.Replies[0]
	switch {
	case rep.Err() != nil:
		return false, fmt.Errorf("%w: memcachedbans: claim expiry: %w", sluice.ErrStore, rep.Err())
	case rep.Status == meta.StatusOK:
		return true, nil
	}
	return false, nil // NS: another process added it first
}
