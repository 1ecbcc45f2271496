package hop_test

import (
	"testing"

	"github.com/omnistage/omnistage/internal/hop/hoptest"
)

func TestMain(m *testing.M) { hoptest.Main(m) }
