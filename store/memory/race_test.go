//go:build race

package memory

func init() { raceEnabled = true }
