// Package snapshot owns the local snapshot's file: a copy on disk of the
// good rules a Redis source holds, so an instance that starts while Redis
// has lost its data (or while a rule's only good version in Redis is
// unreadable) still serves what the fleet served, not nothing. Redis stays
// the source of truth: the rulestore reads the snapshot once, on a
// source's first load, and only for what Redis cannot answer (its
// diskseed.go). This package owns the file's name, format, and atomic
// read and write (snapshot.go); it knows nothing of Redis or Caddy.
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Format is the file's format; another one is not read.
const Format = 1

// File is the file's content.
type File struct {
	Format int       `json:"format"`
	Redis  []string  `json:"redis"`
	Prefix string    `json:"prefix"`
	At     time.Time `json:"at"`
	// Epoch is the Redis epoch marker the rules were read under: another
	// marker in Redis means it lost its data since.
	Epoch string `json:"epoch"`
	// Rules by kind name, then id: the raw fields from Redis.
	Rules map[string]map[string]Rule `json:"rules"`
}

// Rule is one rule of the snapshot.
type Rule struct {
	Fields map[string]string `json:"fields"`
	// Retained: held since Redis lost its data, not in Redis.
	Retained bool `json:"retained,omitempty"`
}

// Name is the file name for a Redis deployment and prefix:
// readable, plus a digest so that distinct ones never share a file.
func Name(addrs []string, db int, master, prefix string) string {
	a := slices.Clone(addrs)
	slices.Sort(a)
	sum := sha256.Sum256([]byte(strings.Join(a, ",") + "\x00" + strconv.Itoa(db) + "\x00" + master + "\x00" + prefix))
	return "rules-" + hex.EncodeToString(sum[:8]) + ".json"
}

// Read reads a snapshot file. A missing file is (nil, nil).
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d File
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("not a rule snapshot: %w", err)
	}
	if d.Format != Format {
		return nil, fmt.Errorf("snapshot format %d, want %d", d.Format, Format)
	}
	return &d, nil
}

// Write replaces the file atomically: a reader (or a crash)
// sees the old file or the new one, never part of one.
func Write(path string, d *File) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
