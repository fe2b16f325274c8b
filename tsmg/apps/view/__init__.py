"""``tsmg view``: a static, self-contained HTML report of evaluation and training runs.

:func:`build_report` reads run folders tolerantly (:mod:`tsmg.apps.view.records`,
:mod:`tsmg.apps.view.runs`), writes the episodes as chunked data files a page loads on demand
(:mod:`tsmg.apps.view.data`), and the page itself (:mod:`tsmg.apps.view.page`, ``static/view.js``).
"""

from tsmg.apps.view.build import ReportFolderError, ViewReport, build_report
from tsmg.apps.view.runs import NotARunError

__all__ = ["NotARunError", "ReportFolderError", "ViewReport", "build_report"]
