"""One module per verb family. Commands share the kernel (`context`, `lifecycle`) and never
import each other (checked by import-linter in CI)."""
