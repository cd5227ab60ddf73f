package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/guard"
)

// The state file (guard.state_file) keeps what the memory store would
// lose at a restart: the bans in force, with their expiry and offences,
// and the list edits of the admin API. It is JSON, written whole to a
// temporary file beside it and renamed over it (a crash leaves the old
// file or the new one, never half of one), at most once per
// stateInterval when something changed, and at Close.
const (
	stateFormat   = "sluice state"
	stateVersion  = 1
	stateInterval = time.Second
	// stateLogEvery bounds the logs of failed writes: the first, then
	// one a minute while they fail, and one when a write succeeds again.
	stateLogEvery = time.Minute
)

// savedState is the content of a state file.
type savedState struct {
	Format  string      `json:"format"`
	Version int         `json:"version"`
	Saved   time.Time   `json:"saved"`
	Bans    []savedBan  `json:"bans"`
	Lists   []savedEdit `json:"list_edits"`
}

type savedBan struct {
	Jail       string    `json:"jail"`
	Key        string    `json:"key"`
	Reason     string    `json:"reason,omitempty"`
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	Offences   int       `json:"offences"`
	Collateral int64     `json:"collateral,omitempty"`
}

type savedEdit struct {
	List  string `json:"list"`
	Entry string `json:"entry"`
	Add   bool   `json:"add"`
}

// stateFile saves the bans of a registry and the list edits to path.
// Its methods are called by one goroutine at a time (the saver, then
// Close).
type stateFile struct {
	path     string
	bans     guard.Registry
	edits    func() listEdits // a copy of the edits, read under the reload lock
	clock    func() time.Time
	log      *slog.Logger
	stop     context.CancelFunc
	done     sync.WaitGroup
	changes  int64     // the registry's changes at the latest write
	saved    listEdits // the edits at the latest write
	failing  bool
	loggedAt time.Time // of the latest log of a failed write
}

// loadState reads the state file at path: none when it does not exist
// (a first start). A file that is corrupt, truncated, of another version
// or not a state file is an error that names it.
func loadState(path string) (savedState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return savedState{}, nil
	}
	if err != nil {
		return savedState{}, fmt.Errorf("guard.state_file %s: %w", path, err)
	}
	var st savedState
	hint := "remove it, or start with -ignore-state-file to overwrite it"
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("guard.state_file %s is corrupt or truncated (%v): %s", path, err, hint)
	}
	if st.Format != stateFormat {
		return st, fmt.Errorf("guard.state_file %s is not a sluice state file: %s", path, hint)
	}
	if st.Version != stateVersion {
		return st, fmt.Errorf("guard.state_file %s is of version %d, this sluice reads %d: %s", path, st.Version, stateVersion, hint)
	}
	return st, nil
}

// restore puts the bans of st still in force at now into r, and returns
// its list edits. An entry that no longer parses is an error naming it.
func (st savedState) restore(ctx context.Context, path string, r guard.Registry, now time.Time) (listEdits, error) {
	for _, b := range st.Bans {
		if !b.Until.After(now) {
			continue
		}
		ban := guard.Ban{Jail: b.Jail, Key: b.Key, Reason: b.Reason, Since: b.Since, Until: b.Until, Offences: b.Offences, Collateral: b.Collateral}
		if _, err := r.Put(ctx, ban); err != nil {
			return nil, fmt.Errorf("guard.state_file %s: ban of %q in jail %q: %w", path, b.Key, b.Jail, err)
		}
	}
	var edits listEdits
	for _, e := range st.Lists {
		entry, err := guard.ParseEntry(e.Entry)
		if err != nil || (e.List != "allow" && e.List != "deny") {
			return nil, fmt.Errorf("guard.state_file %s: list edit %q of list %q: not an entry of the allow or deny list", path, e.Entry, e.List)
		}
		edits.record(listEdit{list: e.List, entry: entry, add: e.Add})
	}
	return edits, nil
}

// start saves the state every stateInterval in which it changed, until
// close.
func (f *stateFile) start() {
	ctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	f.changes = f.bans.Bans().Stats().Changes
	f.saved = f.edits()
	f.done.Go(func() {
		t := time.NewTicker(stateInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f.saveIfChanged(ctx)
			}
		}
	})
}

// close stops the saver and saves the state a last time.
func (f *stateFile) close(ctx context.Context) {
	if f.stop != nil {
		f.stop()
		f.done.Wait()
	}
	f.report(f.save(ctx))
}

// saveIfChanged saves the state when bans or edits changed since the
// latest write, or that write failed.
func (f *stateFile) saveIfChanged(ctx context.Context) {
	if !f.failing && f.bans.Bans().Stats().Changes == f.changes && slices.Equal(f.edits(), f.saved) {
		return
	}
	f.report(f.save(ctx))
}

// save writes the state: the bans in force and the list edits.
func (f *stateFile) save(ctx context.Context) error {
	changes, edits := f.bans.Bans().Stats().Changes, f.edits()
	bans, err := f.bans.List(ctx, f.clock())
	if err != nil {
		return err
	}
	st := savedState{Format: stateFormat, Version: stateVersion, Saved: f.clock().UTC(), Bans: make([]savedBan, len(bans)), Lists: make([]savedEdit, len(edits))}
	for i, b := range bans {
		st.Bans[i] = savedBan{Jail: b.Jail, Key: b.Key, Reason: b.Reason, Since: b.Since, Until: b.Until, Offences: b.Offences, Collateral: b.Collateral}
	}
	for i, e := range edits {
		st.Lists[i] = savedEdit{List: e.list, Entry: e.entry.String(), Add: e.add}
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := writeAtomic(f.path, data); err != nil {
		return err
	}
	f.changes, f.saved = changes, edits
	return nil
}

// report logs a failed write, at most once per stateLogEvery, and the
// first write that succeeds after failures. The bans stay enforced from
// memory either way.
func (f *stateFile) report(err error) {
	now := f.clock()
	switch {
	case err == nil && f.failing:
		f.failing = false
		f.log.Info("guard.state_file written again", "file", f.path)
	case err != nil && (!f.failing || now.Sub(f.loggedAt) >= stateLogEvery):
		f.failing, f.loggedAt = true, now
		f.log.Error("guard.state_file not written: the bans stay enforced, but a restart would lose those since the latest write",
			"file", f.path, "err", err)
	}
}

// writeAtomic writes data to a temporary file beside path, syncs it and
// renames it over path.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// openState restores the bans and list edits of the state file at path,
// unless the options say to ignore it, and makes the stateFile that
// keeps them; none when path is "".
func (s *Service) openState(ctx context.Context, path string) error {
	if path == "" {
		return nil
	}
	if !s.opts.IgnoreStateFile {
		st, err := loadState(path)
		if err != nil {
			return err
		}
		if s.edits, err = st.restore(ctx, path, s.st.registry, s.now()); err != nil {
			return err
		}
		if n := len(st.Bans) + len(st.Lists); n > 0 {
			s.log.Info("guard.state_file read", "file", path, "bans", len(st.Bans), "list_edits", len(st.Lists), "saved", st.Saved)
		}
	}
	s.stateFile = &stateFile{path: path, bans: s.st.registry, clock: s.now, log: s.log, edits: func() listEdits {
		s.reload.Lock()
		defer s.reload.Unlock()
		return slices.Clone(s.edits)
	}}
	return nil
}
