package rulestore

// AbsentTTL is how long the store remembers an id it found absent in Redis
// (refresh.go), for the kill switch benchmark's pause.
const AbsentTTL = absentTTL
