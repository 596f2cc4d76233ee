"""The PNG figures' resolution: devmon's default and the range it accepts.  A module of its
own, without matplotlib, so that `devmon`'s parser can state them cheaply."""

PNG_DPI = 200  # print resolution of the PNG figures
#: Below 50 a figure's text cannot be read; above 600 a page's PNG passes 10 MB.
PNG_DPI_RANGE = (50, 600)
