package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sluicehq/sluice/config"
)

// ReloadFile loads the configuration at path and puts it in force (see
// Reload). A file that does not parse, or that Reload rejects, is logged
// with the reason and counted as a failed reload; the configuration in
// force keeps serving.
func (s *Service) ReloadFile(path string) error {
	c, err := config.Load(path)
	if err == nil {
		err = s.Reload(c)
	} else {
		s.m.reloads.WithLabelValues("failure").Inc()
	}
	if err != nil {
		s.log.Error("configuration reload rejected; the previous configuration keeps serving", "config", path, "err", err)
		return err
	}
	s.log.Info("configuration reloaded", "config", path, "rules", len(c.Rules))
	return nil
}

// settle is how long WatchConfig waits after a change before it reloads:
// editors and deployment tools write a file in several steps (truncate,
// write, rename; Kubernetes swaps a symlink), and one reload at the end
// is what is wanted.
const settle = 100 * time.Millisecond

// WatchConfig calls reload after each change of the file or directory at
// path, until ctx is done. It watches the directory that holds a file, so
// that a file replaced by a rename (as editors and Kubernetes ConfigMaps
// do) is still seen; changes that arrive within a short time of each
// other cause one call.
func WatchConfig(ctx context.Context, path string, reload func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir, isDir := abs, true
	if fi, err := os.Stat(abs); err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	} else if !fi.IsDir() {
		dir, isDir = filepath.Dir(abs), false
	}
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	// The file may be a symlink (a ConfigMap's ..data swap): watch where
	// it points too.
	target, _ := filepath.EvalSymlinks(abs)
	relevant := func(name string) bool {
		if isDir {
			return true
		}
		if name == abs {
			return true
		}
		t, _ := filepath.EvalSymlinks(abs)
		return t != target || filepath.Base(name) == "..data"
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod || !relevant(ev.Name) {
				continue
			}
			target, _ = filepath.EvalSymlinks(abs)
			timer.Reset(settle)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			return fmt.Errorf("watch %s: %w", path, err)
		case <-timer.C:
			reload()
		}
	}
}
