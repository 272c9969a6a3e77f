"""An example spu tool package: ideal-gas molar volume and a Henderson-Hasselbalch buffer pH."""
