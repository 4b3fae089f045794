package rbdstore

// SetClaimPause makes every attempt of s to claim a single-writer volume
// for a node call pause first: a node slowed down between deciding that
// it may take the volume and taking it.
func SetClaimPause(s *Store, pause func(node string)) { s.claimPause = pause }
