"""``python -m placegroup ...`` is the ``placegroup`` command (``dump``, ``launch``, ``keys``)."""
from placegroup.tools.cli import main

main()
