"""Translation backends behind one interface (`service.runtime.base`). Only these files import an engine."""
