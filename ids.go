package hopper

import "github.com/google/uuid"

// NewID returns a new job id: a UUIDv7, so ids sort by creation time. Replace
// it per client with Config.IDGenerator.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
