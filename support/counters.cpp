#include "support/counters.h"

namespace veneer {
Counters& counters() {
  static Counters c;
  return c;
}
}  // namespace veneer
